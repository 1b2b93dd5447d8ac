package resend_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// These tests run the whole loop with the packages around resend: the consumer middleware
// (errorhandler) and the intake of the error topic.

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func logger(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(logWriter{t}, nil)) }

// failedEvent is the MPFE of a temporary failure of the record at topic/partition/offset.
func failedEvent(service, topic string, partition int32, offset int64, key, value []byte, headers []avro.Header) *avro.Event {
	md := &avro.Metadata{}
	if err := md.SetHeaders(headers); err != nil {
		panic(err)
	}
	return &avro.Event{
		Identity:  avro.Identity{EventID: uuid.NewString(), IdempotenceID: uuid.NewString(), Created: time.Now().UTC().Truncate(time.Millisecond)},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "shop", Service: service},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: topic, Partition: partition, Offset: offset},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: avro.Temporary, Code: "TIMEOUT"},
		},
		Payload:            avro.Payload{OriginalMessage: value, OriginalKey: key, ErrorMessage: "downstream timed out", FailedMessageMetadata: md},
		DomainEventVersion: avro.DomainEventVersion,
	}
}

func startScheduler(t *testing.T, st *store.Store, brokers string) {
	t.Helper()
	s, err := resend.New(resend.Config{
		Store:        st,
		Brokers:      brokers,
		ServiceName:  "redrive-test",
		Interval:     20 * time.Millisecond,
		Housekeeping: resend.HousekeepingConfig{Disable: true},
		Producer:     kafka.ConfigMap{"log_level": 3},
		Logger:       logger(t),
		Registerer:   prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, "scheduler", s.Run)
}

// run runs fn until the test ends, then cancels it and waits for it to return.
func run(t *testing.T, what string, fn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", what, err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// handled collects the values a consumer handled.
type handled struct {
	mu     sync.Mutex
	values []string
}

func (h *handled) add(v string) {
	h.mu.Lock()
	h.values = append(h.values, v)
	h.mu.Unlock()
}

func (h *handled) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.values...)
}

// The middleware's target-service filter acknowledges and skips a resend meant for another
// service, and handles one meant for it (and ordinary records).
func TestTargetServiceFilter(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	ctx := context.Background()
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	cluster := testkit.Kafka(t)
	cluster.CreateTopic(t, topic, 1)

	// An ordinary record, then resends of failures of service-a and of service-b.
	cluster.Produce(t, testkit.Message(topic, []byte("k0"), []byte("plain")))
	now := func(int, time.Time) (time.Time, bool) { return time.Now().Add(-time.Second), true }
	_, err = st.Ingest(ctx, []store.Incoming{
		{Event: failedEvent("service-a", topic, 0, 100, []byte("k1"), []byte("for-a"), nil)},
		{Event: failedEvent("service-b", topic, 0, 101, []byte("k2"), []byte("for-b"), nil)},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	startScheduler(t, st, cluster.Bootstrap())
	waitUntil(t, "both resends on the topic", func() bool { return cluster.EndOffsets(topic)[0] == 3 })

	var got handled
	runner, err := confluent.New(errorhandler.Config[[]byte, []byte]{
		GroupID:      "service-a",
		Topics:       []string{topic},
		System:       "shop",
		Service:      "service-a",
		ValueDecoder: errorhandler.Bytes(),
		Handler: errorhandler.HandlerFunc[[]byte, []byte](func(_ context.Context, rec errorhandler.Record[[]byte, []byte]) error {
			got.add(string(rec.Value))
			return nil
		}),
		CommitInterval: 50 * time.Millisecond,
		Logger:         logger(t),
		Metrics:        prometheus.NewRegistry(),
	}, confluent.Settings{Brokers: cluster.Bootstrap()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, "runner", runner.Run)
	waitUntil(t, "all three records committed", func() bool { return cluster.CommittedOffsets("service-a", topic)[0] == 3 })
	if v := got.list(); len(v) != 2 || v[0] != "plain" || v[1] != "for-a" {
		t.Fatalf("service-a handled %q, want [plain for-a]: the resend for service-b must be skipped", v)
	}
}

// A message that fails again after a resend is the next attempt of the same chain, through the
// real loop: middleware → error topic → intake → store → scheduler → original topic → middleware.
// When the chain reaches the policy's maximum, intake stores it PERMANENT ("retries exhausted").
func TestFailingAgainAfterResendContinuesTheChain(t *testing.T) {
	t.Parallel()
	const (
		topic      = "orders"
		errorTopic = "errors"
	)
	pool := testkit.Postgres(t)
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	cluster := testkit.Kafka(t)
	for _, tp := range []string{topic, errorTopic, "errors-dlt"} {
		cluster.CreateTopic(t, tp, 1)
	}
	policy := resend.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond, MaxAttempts: 3}

	in, err := intake.New(intake.Config{
		Store:           st,
		NextAttempt:     policy.Next,
		Bootstrap:       cluster.Bootstrap(),
		Topic:           errorTopic,
		DeadLetterTopic: "errors-dlt",
		BatchWait:       10 * time.Millisecond,
		Logger:          logger(t),
		Registerer:      prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, "intake", in.Run)

	var tries handled
	runner, err := confluent.New(errorhandler.Config[[]byte, []byte]{
		GroupID:       "order-service",
		Topics:        []string{topic},
		System:        "shop",
		Service:       "order-service",
		ValueDecoder:  errorhandler.Bytes(),
		ProcessPolicy: errorhandler.DeadLetter,
		DeadLetter:    errorhandler.DeadLetterConfig{ErrorTopic: errorTopic},
		Handler: errorhandler.HandlerFunc[[]byte, []byte](func(_ context.Context, rec errorhandler.Record[[]byte, []byte]) error {
			tries.add(string(rec.Value))
			return errorhandler.Temporary(errors.New("inventory service unavailable"), "UNAVAILABLE")
		}),
		CommitInterval: 50 * time.Millisecond,
		Logger:         logger(t),
		Metrics:        prometheus.NewRegistry(),
	}, confluent.Settings{Brokers: cluster.Bootstrap()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, "runner", runner.Run)
	startScheduler(t, st, cluster.Bootstrap())

	cluster.Produce(t, testkit.Message(topic, []byte("order-7"), []byte("reserve 3 items"),
		kafka.Header{Key: "trace-id", Value: []byte("abc")}))

	type link struct {
		attempt int
		state   string
		reason  *string
		cause   string
	}
	var chain []link
	waitUntil(t, "three failures of the message, the last one PERMANENT", func() bool {
		rows, err := pool.Query(context.Background(),
			`SELECT attempt, state, state_reason, causing_message FROM failures ORDER BY attempt`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		chain = chain[:0]
		for rows.Next() {
			var l link
			if err := rows.Scan(&l.attempt, &l.state, &l.reason, &l.cause); err != nil {
				t.Fatal(err)
			}
			chain = append(chain, l)
		}
		return len(chain) == 3 && chain[2].state == string(redrive.StatePermanent)
	})
	origin := redrive.TopicPartitionOffset(topic, 0, 0)
	for i, l := range chain {
		if l.attempt != i+1 || l.cause != origin {
			t.Errorf("failure %d: attempt %d of %q, want attempt %d of %q", i, l.attempt, l.cause, i+1, origin)
		}
	}
	if chain[0].state != "RESENT" || chain[1].state != "RESENT" {
		t.Errorf("the first two failures are %s and %s, want RESENT", chain[0].state, chain[1].state)
	}
	if r := chain[2].reason; r == nil || *r != resend.ReasonRetriesExhausted {
		t.Errorf("last failure's reason %v, want %q", r, resend.ReasonRetriesExhausted)
	}
	if n := cluster.EndOffsets(topic)[0]; n != 3 {
		t.Errorf("the original topic holds %d records, want the original and two resends", n)
	}
	if v := tries.list(); len(v) != 3 {
		t.Errorf("the consumer tried the message %d times, want 3", len(v))
	}
}
