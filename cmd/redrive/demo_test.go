package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/demo"
)

// TestDemoEndToEnd runs the demo's wiring for a bounded time: the API shows failures of every
// kind, temporary ones are resent by the scheduler and the resent records are consumed, and
// shutdown leaves no PostgreSQL process and no temporary directory behind.
func TestDemoEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := demoConfig{HTTPAddr: "127.0.0.1:0", Rate: 40, RetryBase: 500 * time.Millisecond, LogLevel: slog.LevelError}
	d, err := startDemo(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.wait() }()
	pgDir := d.pg.Dir()

	var banner bytes.Buffer
	d.printBanner(&banner)
	for _, want := range []string{d.uiURL, "Kafka", "PostgreSQL", "curl -s"} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}

	getJSON := func(path string, v any) error {
		resp, err := http.Get(d.uiURL + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	type page struct {
		Data []struct {
			ErrorCode   string `json:"error_code"`
			Temporality string `json:"temporality"`
			State       string `json:"state"`
		} `json:"data"`
	}
	wantCodes := map[string]string{
		"DESERIALIZATION_FAILED": "PERMANENT",
		"PAYMENT_UNAVAILABLE":    "TEMPORARY",
		"INVALID_AMOUNT":         "PERMANENT",
		"PANIC":                  "UNKNOWN",
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		seen := map[string]bool{}
		resent := 0
		var p page
		if err := getJSON("/api/v1/failures?limit=500", &p); err == nil {
			for _, f := range p.Data {
				if wantCodes[f.ErrorCode] == f.Temporality {
					seen[f.ErrorCode] = true
				}
				if f.Temporality == "TEMPORARY" && f.State == "RESENT" {
					resent++
				}
			}
		}
		if len(seen) == len(wantCodes) && resent > 0 && d.recovered.Load() > 0 && d.good.Load() > 0 {
			t.Logf("kinds %v, %d temporary failures resent, %d resent orders handled, %d good orders", seen, resent, d.recovered.Load(), d.good.Load())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s: kinds %v, %d resent, %d recovered, %d good", seen, resent, d.recovered.Load(), d.good.Load())
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	// The feeder's Spring and Connect dead-letter records are stored as failures of their sources.
	for _, format := range []redrive.SourceFormat{redrive.SourceSpring, redrive.SourceConnect} {
		for {
			n, err := d.svc.store.CountFailures(ctx, redrive.Filter{SourceFormats: []redrive.SourceFormat{format}})
			if err == nil && n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no failure of the %s source after 90s (%v)", format, err)
			}
			time.Sleep(200 * time.Millisecond) // polling interval
		}
	}
	// The Protobuf shipments decode with their writer schema from the demo's registry.
	for {
		var p struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		var dec struct {
			Format      string         `json:"format"`
			MessageType string         `json:"message_type"`
			Value       map[string]any `json:"value"`
		}
		if getJSON("/api/v1/failures?topic="+demoShipmentsTopic+"&limit=20", &p) == nil {
			for _, f := range p.Data {
				if getJSON("/api/v1/failures/"+f.ID+"/payload?format=decoded", &dec) == nil && dec.Format == "protobuf" &&
					dec.MessageType == "shop.shipping.Shipment" && dec.Value["dispatchedAt"] != nil {
					break
				}
				dec.Format = ""
			}
		}
		if dec.Format == "protobuf" {
			t.Logf("a shipment decoded: %v", dec.Value)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Protobuf shipment decoded after 90s (last %+v)", dec)
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	// Failures from both clusters, and temporary ones of the second resent to it.
	for _, f := range []redrive.Filter{{Clusters: []string{demoClusterA}}, {Clusters: []string{demoClusterB}},
		{Clusters: []string{demoClusterB}, States: []redrive.State{redrive.StateResent}}} {
		for {
			n, err := d.svc.store.CountFailures(ctx, f)
			if err == nil && n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no failure of %+v after 90s (%v)", f, err)
			}
			time.Sleep(200 * time.Millisecond) // polling interval
		}
	}
	if resp, err := http.Get(d.uiURL + "/failures"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`name="cluster" value="` + demoClusterB + `"`, `<span class="badge cluster" title="Kafka cluster">`} {
			if !bytes.Contains(body, []byte(want)) {
				t.Errorf("the UI's list lacks %s", want)
			}
		}
	}
	if resp, err := http.Get(d.uiURL + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, check := range []string{`check="bad spring header"`, `check="bad connect header"`} {
			if bytes.Contains(body, []byte(check)) {
				t.Errorf("the feeder's records were dead-lettered: %s", check)
			}
		}
	}
	// The ledger consumer halted its poison partition, and an operator releases it.
	type health struct {
		Status string `json:"status"`
		Halted []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		} `json:"halted"`
	}
	var h health
	deadline = time.Now().Add(60 * time.Second)
	for getJSON("/demo/ledger/health", &h) != nil || len(h.Halted) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("ledger health after 60s: %+v", h)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	if hp := h.Halted[0]; h.Status != "degraded" || hp.Topic != demoLedgerTopic || hp.Partition != demo.LedgerPoisonPartition || hp.Offset != demo.LedgerPoisonIndex {
		t.Fatalf("ledger health %+v, want halted at %s[%d]@%d", h, demoLedgerTopic, demo.LedgerPoisonPartition, demo.LedgerPoisonIndex)
	}
	release, err := http.Post(d.uiURL+"/demo/ledger/health", "application/json",
		strings.NewReader(`{"topic":"ledger","partition":1,"offset":5,"action":"dead-letter"}`))
	if err != nil || release.StatusCode != http.StatusOK {
		t.Fatalf("release: %v %v", err, release)
	}
	release.Body.Close()
	deadline = time.Now().Add(30 * time.Second)
	for getJSON("/demo/ledger/health", &h) != nil || h.Status != "ok" {
		if time.Now().After(deadline) {
			t.Fatalf("ledger health after the release: %+v", h)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}

	// The UI answers too (no authentication in the demo).
	resp, err := http.Get(d.uiURL + "/failures")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("UI /failures: %v %v", err, resp)
	}
	resp.Body.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo stopped with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not stop within 60s")
	}
	if _, err := os.Stat(pgDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary PostgreSQL directory %s still there: %v", pgDir, err)
	}
	if out, _ := exec.Command("pgrep", "-f", pgDir).Output(); len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("processes left running for %s: %s", pgDir, out)
	}
	if _, err := http.Get(d.uiURL + "/healthz"); err == nil {
		t.Error("the demo's HTTP server still answers after shutdown")
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{{"-rate", "0"}, {"-retry-base", "-1s"}, {"-kafka-port", "70000"}, {"-log-level", "loud"}, {"extra"}, {"-bogus"}} {
		var errOut bytes.Buffer
		if _, err := parseDemoConfig(args, &errOut); !errors.Is(err, errUsage) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}
