package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/migrations"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// mergeEnv returns a copy of m with k set to v.
func mergeEnv(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func TestServeConfig(t *testing.T) {
	t.Parallel()
	full := map[string]string{
		"REDRIVE_DATABASE_URL":      "postgres://db/redrive",
		"REDRIVE_KAFKA_BOOTSTRAP":   "kafka:9092",
		"REDRIVE_ERROR_TOPIC":       "errors",
		"REDRIVE_DLT_TOPIC":         "errors-dlt",
		"REDRIVE_INTAKE_BATCH_SIZE": "250",
	}
	var errOut bytes.Buffer
	cfg, err := parseServeConfig([]string{"-batch-wait", "50ms"}, envMap(full), &errOut)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, errOut.String())
	}
	if cfg.BatchSize != 250 || cfg.BatchWait != 50*time.Millisecond || cfg.GroupID != "redrive-intake" || cfg.HTTPAddr != ":8080" {
		t.Errorf("config = %+v", cfg)
	}
	if cfg, err = parseServeConfig([]string{"-error-topic", "other"}, envMap(full), &errOut); err != nil || cfg.ErrorTopic != "other" {
		t.Errorf("a flag does not override its variable: %+v, %v", cfg, err)
	}

	withSources := mergeEnv(full, "REDRIVE_SOURCES", "spring:orders.DLT?temporality=TEMPORARY, connect:sink.dlq=payments\nraw:x.DLQ=x")
	delete(withSources, "REDRIVE_ERROR_TOPIC")
	cfg, err = parseServeConfig(nil, envMap(withSources), &errOut)
	if err != nil || len(cfg.Sources) != 3 || cfg.Sources[1].OriginalTopic != "payments" || cfg.ErrorTopic != "" {
		t.Errorf("sources from the variable: %+v, %v\n%s", cfg.Sources, err, errOut.String())
	}
	cfg, err = parseServeConfig([]string{"-source", "streams:s.dlq"}, envMap(withSources), &errOut)
	if err != nil || len(cfg.Sources) != 1 || cfg.Sources[0].Topic != "s.dlq" {
		t.Errorf("-source does not replace the variable: %+v, %v", cfg.Sources, err)
	}

	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"nothing set", nil, nil, []string{"REDRIVE_DATABASE_URL (-database-url) is required",
			"REDRIVE_KAFKA_BOOTSTRAP (-kafka-bootstrap) is required", "REDRIVE_ERROR_TOPIC (-error-topic) is required (or give REDRIVE_SOURCES (-source))",
			"REDRIVE_DLT_TOPIC (-dlt-topic) is required"}},
		{"same topics", full, []string{"-dlt-topic", "errors"}, []string{"REDRIVE_DLT_TOPIC (-dlt-topic) is the error topic"}},
		{"bad integer", map[string]string{"REDRIVE_INTAKE_BATCH_SIZE": "many"}, nil, []string{`REDRIVE_INTAKE_BATCH_SIZE="many" is not an integer`}},
		{"bad duration", map[string]string{"REDRIVE_INTAKE_BATCH_WAIT": "soon"}, nil, []string{`REDRIVE_INTAKE_BATCH_WAIT="soon"`}},
		{"batch too large", full, []string{"-batch-size", "1000000"}, []string{"REDRIVE_INTAKE_BATCH_SIZE (-batch-size) is 1000000"}},
		{"log level", full, []string{"-log-level", "loud"}, []string{"REDRIVE_LOG_LEVEL (-log-level)"}},
		{"stray argument", full, []string{"extra"}, []string{"unexpected arguments"}},
		{"bad source", full, []string{"-source", "spring:a.DLT", "-source", "raw:b.DLQ"}, []string{`REDRIVE_SOURCES (-source) has a bad entry`, `source "raw:b.DLQ": a raw source needs its original topic`}},
		{"bad source variable", mergeEnv(full, "REDRIVE_SOURCES", "spring:a.DLT\nkafka:c"), nil, []string{`source "kafka:c": format "kafka"`}},
		{"source twice", full, []string{"-source", "mpfe:errors"}, []string{`entry "mpfe:errors" reads topic "errors", which mpfe:errors (-error-topic) reads already`}},
		{"source is the dlt", full, []string{"-source", "spring:errors-dlt"}, []string{`reads the dead-letter topic "errors-dlt"`}},
	}
	for _, c := range cases {
		var errOut bytes.Buffer
		_, err := parseServeConfig(c.args, envMap(c.env), &errOut)
		if !errors.Is(err, errUsage) {
			t.Errorf("%s: err = %v, want a usage error", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%s: stderr %q does not say %q", c.name, errOut.String(), w)
			}
		}
	}
}

// serveArgs returns flags for a service on db and cluster.
func serveArgs(dsn, bootstrap string) []string {
	return []string{"-database-url", dsn, "-kafka-bootstrap", bootstrap, "-error-topic", "errors",
		"-dlt-topic", "errors-dlt", "-http-addr", "127.0.0.1:0", "-log-level", "warn"}
}

func TestServeRefusesSchemaNotCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	empty := testkit.EmptyPostgres(t)
	var out, errOut bytes.Buffer
	err := runServe(ctx, serveArgs(empty.DSN, "127.0.0.1:1"), stdio{out: &out, err: &errOut})
	if !errors.Is(err, migrations.ErrNotMigrated) || !strings.Contains(err.Error(), "redrive migrate") {
		t.Errorf("serve on an empty database = %v, want ErrNotMigrated saying what to run", err)
	}

	newer := testkit.PostgresDB(t)
	if _, err := newer.Pool.Exec(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)", migrations.Latest()+1); err != nil {
		t.Fatal(err)
	}
	err = runServe(ctx, serveArgs(newer.DSN, "127.0.0.1:1"), stdio{out: &out, err: &errOut})
	if !errors.Is(err, migrations.ErrSchemaNewer) {
		t.Errorf("serve on a newer schema = %v, want ErrSchemaNewer", err)
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := testkit.PostgresDB(t)
	cluster := testkit.Kafka(t)
	cluster.CreateTopic(t, "errors", 2)
	cluster.CreateTopic(t, "errors-dlt", 1)

	var errOut bytes.Buffer
	const token = "operator-secret-token-0123456789abcdef"
	cfg, err := parseServeConfig(append(serveArgs(db.DSN, cluster.Bootstrap()), "-state-metrics-interval", "50ms", "-batch-wait", "20ms",
		"-api-tokens", "ops:operator:"+token, "-retry-base", "1h"), envMap(nil), &errOut)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	svc, err := newService(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.run(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}
	}

	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q", code, body)
	}
	waitFor("/readyz", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })

	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &avro.Event{
		Identity:  avro.Identity{EventID: uuid.NewString(), IdempotenceID: uuid.NewString(), Created: time.UnixMilli(1780000000123).UTC()},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "shop", Service: "billing"},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: "orders", Partition: 0, Offset: 7},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: avro.Temporary, Code: "BOOM"},
		},
		Payload:            avro.Payload{OriginalMessage: []byte("value"), ErrorMessage: "boom"},
		DomainEventVersion: avro.DomainEventVersion,
	}
	value, err := codec.EncodeEvent("errors", ev)
	if err != nil {
		t.Fatal(err)
	}
	cluster.Produce(t, testkit.Message("errors", nil, value), testkit.Message("errors", nil, []byte("garbage")),
		&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: serveTestPtr("errors"), Partition: 1}, Value: value})

	var state string
	waitFor("the failure stored", func() bool {
		return db.Pool.QueryRow(ctx, "SELECT state FROM failures WHERE idempotence_id = $1", ev.Identity.IdempotenceID).Scan(&state) == nil
	})
	if state != "RETRY_PENDING" {
		t.Errorf("state %s, want RETRY_PENDING", state)
	}
	cluster.ConsumeN(t, "errors-dlt", 1, 30*time.Second)
	for _, want := range []string{
		`redrive_intake_failures_ingested_total{cluster="default",service="billing",temporality="TEMPORARY",topic="orders"} 1`,
		`redrive_intake_duplicates_total{cluster="default"} 1`,
		`redrive_intake_dead_lettered_total{check="unknown first byte",cluster="default"} 1`,
		`redrive_failures{cluster="default",state="RETRY_PENDING"} 1`,
		`redrive_failures{cluster="_other",state="RETRY_PENDING"} 0`,
		`redrive_failures_oldest_age_seconds{cluster="default",state="RETRY_PENDING"}`,
		`redrive_intake_batch_duration_seconds_bucket`,
		`process_resident_memory_bytes`,
	} {
		waitFor("metric "+want, func() bool { _, body := get("/metrics"); return strings.Contains(body, want) })
	}

	// The REST API and the UI are mounted, behind authentication.
	apiGet := func(path, bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := apiGet("/api/v1/failures", ""); code != http.StatusUnauthorized {
		t.Errorf("/api/v1/failures without a token = %d, want 401", code)
	}
	if code, body := apiGet("/api/v1/failures?state=RETRY_PENDING", token); code != http.StatusOK || !strings.Contains(body, `"error_code":"BOOM"`) {
		t.Errorf("/api/v1/failures = %d %s", code, body)
	}
	if code, body := apiGet("/", ""); code != http.StatusOK && code != http.StatusSeeOther && code != http.StatusFound || !strings.Contains(strings.ToLower(body), "token") {
		t.Errorf("UI / without a session = %d, want the sign-in page", code)
	}
	for _, want := range []string{`redrive_resend_scheduler_lag_seconds`} {
		waitFor("metric "+want, func() bool { _, body := get("/metrics"); return strings.Contains(body, want) })
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v after cancel", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func serveTestPtr[T any](v T) *T { return &v }
