package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
)

// twoClusters is a service reading two in-process Kafka clusters, eu and us.
type twoClusters struct {
	t      *testing.T
	db     *testkit.DB
	eu, us *testkit.Cluster
	base   string
	token  string
	codec  *avro.Codec
	cancel context.CancelFunc
	done   chan error
}

const clusterTestToken = "admin-secret-token-0123456789abcdef0"

func startTwoClusters(t *testing.T) *twoClusters {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &twoClusters{t: t, db: testkit.PostgresDB(t), eu: testkit.Kafka(t), us: testkit.Kafka(t), token: clusterTestToken, cancel: cancel,
		done: make(chan error, 1)}
	t.Cleanup(cancel)
	for _, c := range []*testkit.Cluster{e.eu, e.us} {
		for _, topic := range []string{"errors", "errors-dlt", "orders", "orders.retry"} {
			c.CreateTopic(t, topic, 1)
		}
	}
	file := filepath.Join(t.TempDir(), "clusters.yaml")
	doc := fmt.Sprintf(`# two clusters, as a ConfigMap would hold them
clusters:
  - name: eu
    bootstrap: %s
    kafka_config:
      log_level: 3
    error_topic: errors
  - name: us
    bootstrap: ${US_BOOTSTRAP}
    error_topic: errors
cross_cluster:
  - from: eu
    to: us
`, e.eu.Bootstrap())
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cfg, err := parseServeConfig([]string{"-database-url", e.db.DSN, "-clusters-file", file, "-dlt-topic", "errors-dlt",
		"-http-addr", "127.0.0.1:0", "-batch-wait", "20ms", "-resend-interval", "100ms", "-retry-base", "100ms", "-retry-max", "200ms",
		"-api-tokens", "ops:admin:" + e.token, "-repair-topics", "orders.retry"},
		envMap(map[string]string{"US_BOOTSTRAP": e.us.Bootstrap()}), &errOut)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	cfg.kafkaCheckInterval = 200 * time.Millisecond
	cfg.resendSendTimeout = 3 * time.Second
	svc, err := newService(ctx, cfg, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { e.done <- svc.run(ctx, ln) }()
	e.base = "http://" + ln.Addr().String()
	if e.codec, err = avro.NewCodec(avro.Config{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("both clusters ready", func() bool { code, body := e.get("/readyz"); return code == http.StatusOK && body == "ready\n" })
	return e
}

// stop ends the service and waits for it.
func (e *twoClusters) stop() {
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("run = %v after cancel", err)
		}
	case <-time.After(60 * time.Second):
		e.t.Fatal("run did not return after cancel")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (e *twoClusters) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond) // polling interval
	}
}

func (e *twoClusters) get(path string) (int, string) {
	return e.do(http.MethodGet, path, "")
}

func (e *twoClusters) do(method, path, body string) (int, string) {
	req, _ := http.NewRequest(method, e.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// event returns an MPFE of a failed record of topic orders with value.
func clusterTestEvent(value string, t avro.Temporality) *avro.Event {
	return &avro.Event{
		Identity:  avro.Identity{EventID: uuid.NewString(), IdempotenceID: uuid.NewString(), Created: time.Now().UTC().Truncate(time.Millisecond)},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "shop", Service: "billing"},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: "orders", Partition: 0, Offset: 7},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: t, Code: "BOOM"},
		},
		Payload:            avro.Payload{OriginalMessage: []byte(value), OriginalKey: []byte("k-" + value), ErrorMessage: "boom " + value},
		DomainEventVersion: avro.DomainEventVersion,
	}
}

// fail produces an MPFE of value to the cluster's error topic and returns its idempotence id.
func (e *twoClusters) fail(c *testkit.Cluster, value string, t avro.Temporality) string {
	e.t.Helper()
	ev := clusterTestEvent(value, t)
	b, err := e.codec.EncodeEvent("errors", ev)
	if err != nil {
		e.t.Fatal(err)
	}
	c.Produce(e.t, testkit.Message("errors", nil, b))
	return ev.Identity.IdempotenceID
}

// stored waits for the failure and returns its cluster and state.
func (e *twoClusters) stored(idem string) (cluster, state string) {
	e.t.Helper()
	e.waitFor("failure "+idem+" stored", func() bool {
		return e.db.Pool.QueryRow(context.Background(), "SELECT cluster, state FROM failures WHERE idempotence_id = $1", idem).Scan(&cluster, &state) == nil
	})
	return cluster, state
}

func (e *twoClusters) waitState(idem, want string) {
	e.t.Helper()
	e.waitFor("failure "+idem+" "+want, func() bool {
		var state string
		return e.db.Pool.QueryRow(context.Background(), "SELECT state FROM failures WHERE idempotence_id = $1", idem).Scan(&state) == nil && state == want
	})
}

func (e *twoClusters) id(idem string) string {
	var id string
	if err := e.db.Pool.QueryRow(context.Background(), "SELECT id::text FROM failures WHERE idempotence_id = $1", idem).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// values reads every value on the topic of the cluster.
func values(t *testing.T, c *testkit.Cluster, topic string) []string {
	t.Helper()
	var n int64
	for _, end := range c.EndOffsets(topic) {
		n += end
	}
	if n == 0 {
		return nil
	}
	var out []string
	for _, m := range c.ConsumeN(t, topic, int(n), 30*time.Second) {
		out = append(out, string(m.Value))
	}
	return out
}

func waitValues(t *testing.T, c *testkit.Cluster, topic string, want ...string) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := values(t, c, topic)
		missing := false
		for _, w := range want {
			if !strings.Contains(strings.Join(got, "\x00")+"\x00", w+"\x00") {
				missing = true
			}
		}
		if !missing {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %q among them", topic, got, want)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// One service reads two Kafka clusters: each failure records its cluster, and the scheduler's
// resends, a job's and a reactivation's each reach the right cluster (read back from each);
// the API filters by cluster; a cross-cluster resend_to goes only along the allowed route; a
// cluster that goes down is named by the readiness while the other keeps ingesting and
// resending.
func TestTwoClusters(t *testing.T) {
	t.Parallel()
	e := startTwoClusters(t)
	ctx := context.Background()

	// Intake from both, and the scheduler's resends back to each failure's own cluster.
	euTemp := e.fail(e.eu, "eu-temporary", avro.Temporary)
	usTemp := e.fail(e.us, "us-temporary", avro.Temporary)
	if c, _ := e.stored(euTemp); c != "eu" {
		t.Errorf("failure from eu stored with cluster %q", c)
	}
	if c, _ := e.stored(usTemp); c != "us" {
		t.Errorf("failure from us stored with cluster %q", c)
	}
	e.waitState(euTemp, "RESENT")
	e.waitState(usTemp, "RESENT")
	euOrders := waitValues(t, e.eu, "orders", "eu-temporary")
	usOrders := waitValues(t, e.us, "orders", "us-temporary")
	if contains(euOrders, "us-temporary") || contains(usOrders, "eu-temporary") {
		t.Errorf("a resend went to the wrong cluster: eu orders %q, us orders %q", euOrders, usOrders)
	}

	// The API filters by cluster and shows it.
	code, body := e.get("/api/v1/failures?cluster=us")
	var page struct {
		Data []struct {
			ID      string `json:"id"`
			Cluster string `json:"cluster"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &page); code != http.StatusOK || err != nil || len(page.Data) != 1 || page.Data[0].Cluster != "us" {
		t.Errorf("GET /failures?cluster=us = %d %s", code, body)
	}
	if code, body := e.get("/api/v1/failures/" + e.id(euTemp)); code != http.StatusOK || !strings.Contains(body, `"cluster":"eu"`) {
		t.Errorf("GET /failures/{id} of eu = %d %s", code, body)
	}
	if code, body := e.get("/api/v1/failures?cluster=Not%20A%20Name"); code != http.StatusBadRequest || !strings.Contains(body, "cluster") {
		t.Errorf("GET /failures?cluster=<bad> = %d %s, want 400 naming cluster", code, body)
	}

	// A retry job over both clusters' PERMANENT failures sends each to its own cluster.
	euPerm := e.fail(e.eu, "eu-permanent", avro.Permanent)
	usPerm := e.fail(e.us, "us-permanent", avro.Permanent)
	e.stored(euPerm)
	e.stored(usPerm)
	job := e.runJob(`{"action":"retry","filter":{"state":"PERMANENT"}}`)
	if job != "DONE" {
		t.Errorf("retry job ended %s", job)
	}
	e.waitState(euPerm, "RESENT")
	e.waitState(usPerm, "RESENT")
	euOrders = waitValues(t, e.eu, "orders", "eu-permanent")
	usOrders = waitValues(t, e.us, "orders", "us-permanent")
	if contains(euOrders, "us-permanent") || contains(usOrders, "eu-permanent") {
		t.Errorf("a job's resend went to the wrong cluster: eu orders %q, us orders %q", euOrders, usOrders)
	}

	// A resend_to another cluster: allowed from eu to us, refused (4xx) from us to eu.
	euMove := e.fail(e.eu, "eu-to-us", avro.Permanent)
	usMove := e.fail(e.us, "us-to-eu", avro.Permanent)
	e.stored(euMove)
	e.stored(usMove)
	if code, body := e.do(http.MethodPost, "/api/v1/jobs", `{"action":"resend_to","target_topic":"orders.retry","target_cluster":"eu","filter":{"cluster":"us","state":"PERMANENT"}}`); code != http.StatusBadRequest || !strings.Contains(body, "target_cluster") {
		t.Errorf("resend_to from us to eu = %d %s, want 400 naming target_cluster", code, body)
	}
	if job := e.runJob(`{"action":"resend_to","target_topic":"orders.retry","target_cluster":"us","filter":{"cluster":"eu","state":"PERMANENT"}}`); job != "DONE" {
		t.Errorf("resend_to job from eu to us ended %s", job)
	}
	waitValues(t, e.us, "orders.retry", "eu-to-us")
	if got := values(t, e.eu, "orders.retry"); len(got) != 0 {
		t.Errorf("eu orders.retry holds %q, want nothing", got)
	}

	// A reactivation reads the dead-letter topic of the cluster asked for, and stores what it
	// can with that cluster.
	euDLT := e.deadLetter(e.eu, "eu-reactivated")
	usDLT := e.deadLetter(e.us, "us-reactivated")
	code, body = e.do(http.MethodPost, "/api/v1/dead-letters/reactivations", `{"up_to_now":true,"cluster":"us"}`)
	var run struct {
		ID      int64  `json:"id"`
		Cluster string `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(body), &run); code != http.StatusCreated && code != http.StatusAccepted && code != http.StatusOK || err != nil || run.Cluster != "us" {
		t.Fatalf("POST /dead-letters/reactivations = %d %s", code, body)
	}
	if c, _ := e.stored(usDLT); c != "us" {
		t.Errorf("reactivated failure stored with cluster %q, want us", c)
	}
	var euSeen int
	if err := e.db.Pool.QueryRow(ctx, "SELECT count(*) FROM failures WHERE idempotence_id = $1", euDLT).Scan(&euSeen); err != nil || euSeen != 0 {
		t.Errorf("a reactivation of us stored the dead letter of eu (%d, %v)", euSeen, err)
	}
	if code, body := e.do(http.MethodPost, "/api/v1/dead-letters/reactivations", `{"up_to_now":true,"cluster":"mars"}`); code != http.StatusBadRequest || !strings.Contains(body, "cluster") {
		t.Errorf("reactivation of an unknown cluster = %d %s, want 400", code, body)
	}

	// Metrics carry the cluster.
	_, metrics := e.get("/metrics")
	for _, want := range []string{
		`redrive_intake_failures_ingested_total{cluster="eu",`, `redrive_intake_failures_ingested_total{cluster="us",`,
		`redrive_resend_cluster_records_total{cluster="eu",result="acknowledged"}`,
		`redrive_resend_cluster_records_total{cluster="us",result="acknowledged"}`,
		`redrive_resend_cluster_up{cluster="us"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// us goes down: readiness names it and stays 200; eu keeps ingesting and resending.
	e.us.Fake().Close()
	usLost := e.fail(e.eu, "eu-after-us-down", avro.Temporary) // produced to eu
	e.waitFor("readiness naming us", func() bool {
		code, body := e.get("/readyz")
		return code == http.StatusOK && strings.Contains(body, "cluster us: unreachable") && !strings.Contains(body, "cluster eu")
	})
	if c, _ := e.stored(usLost); c != "eu" {
		t.Errorf("failure after us went down stored with cluster %q", c)
	}
	e.waitState(usLost, "RESENT")
	waitValues(t, e.eu, "orders", "eu-after-us-down")
	if code, body := e.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with us down = %d %s", code, body)
	}
	e.stop()
}

// runJob previews and starts a job and waits for it to end; it returns its final state.
func (e *twoClusters) runJob(body string) string {
	e.t.Helper()
	code, resp := e.do(http.MethodPost, "/api/v1/jobs", body)
	var p struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(resp), &p); code != http.StatusCreated || err != nil {
		e.t.Fatalf("POST /jobs %s = %d %s", body, code, resp)
	}
	if code, resp := e.do(http.MethodPost, "/api/v1/jobs/"+p.Job.ID+"/start", `{"token":"`+p.Token+`"}`); code != http.StatusOK {
		e.t.Fatalf("start job = %d %s", code, resp)
	}
	var state string
	e.waitFor("job "+p.Job.ID+" ended", func() bool {
		_, resp := e.get("/api/v1/jobs/" + p.Job.ID)
		var j struct {
			State string `json:"state"`
		}
		_ = json.Unmarshal([]byte(resp), &j)
		state = j.State
		return state == "DONE" || state == "CANCELLED" || state == "FAILED"
	})
	return state
}

// deadLetter puts on the cluster's own dead-letter topic the dead-letter event of a valid
// MPFE (as the intake writes one while the schema registry is down), and returns the MPFE's
// idempotence id.
func (e *twoClusters) deadLetter(c *testkit.Cluster, value string) string {
	e.t.Helper()
	inner := clusterTestEvent(value, avro.Permanent)
	innerBytes, err := e.codec.EncodeEvent("errors", inner)
	if err != nil {
		e.t.Fatal(err)
	}
	outer := clusterTestEvent("", avro.Permanent)
	outer.References.Message = avro.MessageReference{Type: avro.MessageReferenceType, TopicName: "errors", Partition: 0, Offset: 1000}
	outer.References.ErrorType.Code = "DESERIALIZATION_FAILED"
	outer.Payload = avro.Payload{OriginalMessage: innerBytes, ErrorMessage: "schema registry down"}
	b, err := e.codec.EncodeEvent("errors-dlt", outer)
	if err != nil {
		e.t.Fatal(err)
	}
	c.Produce(e.t, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: serveTestPtr("errors-dlt"), Partition: 0}, Value: b})
	return inner.Identity.IdempotenceID
}
