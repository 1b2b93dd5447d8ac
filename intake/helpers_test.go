package intake

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

const (
	errorTopic = "errors"
	dltTopic   = "errors-dlt"
	waitLimit  = 30 * time.Second
)

// next is a deterministic backoff for tests: attempt n is due n minutes later, 3 attempts.
func next(attempt int, now time.Time) (time.Time, bool) {
	if attempt >= 3 {
		return time.Time{}, false
	}
	return now.Add(time.Duration(attempt) * time.Minute), true
}

// env is one intake test: a kfake cluster with the two topics, a fresh database, an intake.
type env struct {
	t       *testing.T
	kafka   *testkit.Cluster
	db      *testkit.DB
	pool    *pgxpool.Pool
	store   *store.Store
	codec   *avro.Codec
	reg     *prometheus.Registry
	intake  *Intake
	group   string
	stop    context.CancelFunc
	stopped chan error
}

// newEnv prepares an environment; cfg may adjust the intake's config before New.
func newEnv(t *testing.T, cfg func(*Config)) *env {
	t.Helper()
	e := &env{t: t, kafka: testkit.Kafka(t), db: testkit.PostgresDB(t), reg: prometheus.NewRegistry(), group: "intake-" + uuid.NewString()[:8]}
	e.pool = e.db.Pool
	e.kafka.CreateTopic(t, errorTopic, 3)
	e.kafka.CreateTopic(t, dltTopic, 1)
	var err error
	if e.store, err = store.New(store.Config{Pool: e.pool}); err != nil {
		t.Fatal(err)
	}
	if e.codec, err = avro.NewCodec(avro.Config{}); err != nil {
		t.Fatal(err)
	}
	c := Config{
		Store:           e.store,
		NextAttempt:     next,
		Codec:           e.codec,
		Bootstrap:       e.kafka.Bootstrap(),
		Topic:           errorTopic,
		DeadLetterTopic: dltTopic,
		GroupID:         e.group,
		ConsumerConfig: kafka.ConfigMap{
			"session.timeout.ms":    3000,
			"heartbeat.interval.ms": 300,
			"fetch.wait.max.ms":     50,
			"log_level":             4,
		},
		ProducerConfig:  kafka.ConfigMap{"linger.ms": 1, "log_level": 4},
		BatchWait:       20 * time.Millisecond,
		RetryMin:        10 * time.Millisecond,
		RetryMax:        200 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Registerer:      e.reg,
	}
	if cfg != nil {
		cfg(&c)
	}
	if e.intake, err = New(c); err != nil {
		t.Fatal(err)
	}
	return e
}

// start runs the intake until the test ends (or stopIntake).
func (e *env) start() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	e.stopped = make(chan error, 1)
	go func() { e.stopped <- e.intake.Run(ctx) }()
	e.t.Cleanup(func() { e.stopIntake() })
}

// stopIntake cancels Run and returns its error, failing the test if it does not return within
// the shutdown timeout plus a margin.
func (e *env) stopIntake() error {
	if e.stop == nil {
		return nil
	}
	e.stop()
	e.stop = nil
	select {
	case err := <-e.stopped:
		return err
	case <-time.After(e.intake.cfg.ShutdownTimeout + 10*time.Second):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		e.t.Errorf("Run did not return after cancel\n%s", buf[:n])
		return nil
	}
}

// event returns a valid MPFE with a fresh idempotenceId.
func event(temporality avro.Temporality) *avro.Event {
	return &avro.Event{
		Identity:  avro.Identity{EventID: uuid.NewString(), IdempotenceID: uuid.NewString(), Created: time.UnixMilli(1780000000123).UTC()},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "shop", Service: "billing"},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: "orders", Partition: 1, Offset: 4242424242},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: temporality, Code: "BOOM"},
		},
		Payload:            avro.Payload{OriginalMessage: []byte("value"), ErrorMessage: "boom"},
		DomainEventVersion: avro.DomainEventVersion,
	}
}

// encode frames e for the error topic.
func (e *env) encode(ev *avro.Event) []byte {
	e.t.Helper()
	b, err := e.codec.EncodeEvent(errorTopic, ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// produce writes raw values to the error topic and returns the delivered messages.
func (e *env) produce(values ...[]byte) []*kafka.Message {
	e.t.Helper()
	msgs := make([]*kafka.Message, len(values))
	for i, v := range values {
		msgs[i] = testkit.Message(errorTopic, []byte(fmt.Sprintf("key-%d", i)), v)
	}
	return e.kafka.Produce(e.t, msgs...)
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for state
	}
}

func (e *env) rows() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM failures").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// committed reports whether the group committed the end of every partition of the error topic.
func (e *env) committedAll() bool {
	end := e.kafka.EndOffsets(errorTopic)
	got := e.kafka.CommittedOffsets(e.group, errorTopic)
	for p, o := range end {
		if o > 0 && got[p] != o {
			return false
		}
	}
	return true
}

// committedSum is the sum of the group's committed offsets on the error topic.
func (e *env) committedSum() int64 {
	var n int64
	for _, o := range e.kafka.CommittedOffsets(e.group, errorTopic) {
		n += o
	}
	return n
}

func (e *env) counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
