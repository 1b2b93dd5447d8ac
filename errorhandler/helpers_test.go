package errorhandler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
)

const (
	testTopic    = "orders"
	testErrTopic = "errors"
	waitTimeout  = 30 * time.Second
)

// env is one test's Kafka cluster with an input topic and an error topic.
type env struct {
	t   *testing.T
	k   *testkit.Cluster
	reg *prometheus.Registry
}

func newEnv(t *testing.T, partitions int) *env {
	t.Helper()
	k := testkit.Kafka(t)
	k.CreateTopic(t, testTopic, partitions)
	k.CreateTopic(t, testErrTopic, 3)
	return &env{t: t, k: k, reg: prometheus.NewRegistry()}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() && os.Getenv("EH_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	level := slog.LevelInfo
	if os.Getenv("EH_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

// tWriter sends logs to t.Log (shown for failed tests) until the test ends.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(string(p))
	return len(p), nil
}

// config returns a runner config for the env with quiet, fast client settings.
func (e *env) config(group string, h Handler[[]byte, string]) Config[[]byte, string] {
	return Config[[]byte, string]{
		Brokers:      e.k.Bootstrap(),
		GroupID:      group,
		Topics:       []string{testTopic},
		System:       "test-system",
		Service:      "test-service",
		KeyDecoder:   Bytes(),
		ValueDecoder: stringDecoder(),
		Handler:      h,
		ConsumerConfig: kafka.ConfigMap{
			"session.timeout.ms":    6000,
			"heartbeat.interval.ms": 200,
			"fetch.wait.max.ms":     20,
			"log_level":             3,
		},
		DeadLetter: DeadLetterConfig{
			ErrorTopic:     testErrTopic,
			ProducerConfig: kafka.ConfigMap{"linger.ms": 1, "log_level": 3},
			RetryBackoff:   20 * time.Millisecond,
		},
		CommitInterval:  50 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second,
		Logger:          testLogger(e.t),
		Metrics:         e.reg,
	}
}

// stringDecoder decodes UTF-8 text; a value starting with "bad" is undecodable.
func stringDecoder() Decoder[string] {
	return DecoderFunc[string](func(_ string, data []byte) (string, error) {
		if len(data) >= 3 && string(data[:3]) == "bad" {
			return "", errors.New("undecodable value")
		}
		return string(data), nil
	})
}

// started is a runner running in the background.
type started struct {
	r      *Runner[[]byte, string]
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func (e *env) start(cfg Config[[]byte, string]) *started {
	e.t.Helper()
	r, err := New(cfg)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- r.Run(ctx) }()
	e.t.Cleanup(func() { _ = s.stop() })
	return s
}

// stop cancels the runner and returns Run's error.
func (s *started) stop() error {
	s.once.Do(func() {
		s.cancel()
		select {
		case s.err = <-s.done:
		case <-time.After(time.Minute):
			s.err = errors.New("Run did not return within a minute")
		}
	})
	return s.err
}

// produce writes records to the input topic's partition p with values vals (keys "k<i>").
func (e *env) produce(p int32, vals ...string) []*kafka.Message {
	e.t.Helper()
	msgs := make([]*kafka.Message, len(vals))
	for i, v := range vals {
		topic := testTopic
		msgs[i] = &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: p},
			Key:            []byte(fmt.Sprintf("k%d", i)),
			Value:          []byte(v),
		}
	}
	return e.k.Produce(e.t, msgs...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// committed returns the group's committed offset of the input topic's partition p, or -1.
func (e *env) committed(group string, p int32) int64 {
	if off, ok := e.k.CommittedOffsets(group, testTopic)[p]; ok {
		return off
	}
	return -1
}

// mpfes reads n MPFEs from the error topic and decodes them with the avro package.
func (e *env) mpfes(n int) []*avro.Event {
	e.t.Helper()
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	msgs := e.k.ConsumeN(e.t, testErrTopic, n, waitTimeout)
	out := make([]*avro.Event, len(msgs))
	for i, m := range msgs {
		ev, err := codec.DecodeEvent(testErrTopic, m.Value)
		if err != nil {
			e.t.Fatalf("MPFE %d does not decode: %v", i, err)
		}
		key, err := codec.DecodeKey(testErrTopic, m.Key)
		if err != nil {
			e.t.Fatalf("MPFE key %d does not decode: %v", i, err)
		}
		if key.Key != ev.Identity.IdempotenceID && (ev.Payload.FailedMessageMetadata == nil || ev.Payload.FailedMessageMetadata.EventID == nil || key.Key != *ev.Payload.FailedMessageMetadata.EventID) {
			e.t.Errorf("MPFE %d key %q is neither the message id nor the idempotenceId", i, key.Key)
		}
		out[i] = ev
	}
	slices.SortFunc(out, func(a, b *avro.Event) int {
		if a.References.Message.Partition != b.References.Message.Partition {
			return int(a.References.Message.Partition - b.References.Message.Partition)
		}
		return int(a.References.Message.Offset - b.References.Message.Offset)
	})
	return out
}

// errTopicCount returns the number of records in the error topic.
func (e *env) errTopicCount() int64 {
	var n int64
	for _, hw := range e.k.EndOffsets(testErrTopic) {
		n += hw
	}
	return n
}

func (e *env) failures(phase, outcome string) float64 {
	return testutil.ToFloat64(mustMetrics(e.t, e.reg).failures.WithLabelValues(phase, outcome, testTopic))
}

func mustMetrics(t *testing.T, reg prometheus.Registerer) *metrics {
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recorder is a handler that records what it saw and fails values starting with "fail".
type recorder struct {
	mu   sync.Mutex
	seen map[int32][]int64
	vals []string
}

func newRecorder() *recorder { return &recorder{seen: map[int32][]int64{}} }

func (h *recorder) Handle(_ context.Context, rec Record[[]byte, string]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[rec.Message.TopicPartition.Partition] = append(h.seen[rec.Message.TopicPartition.Partition], int64(rec.Message.TopicPartition.Offset))
	h.vals = append(h.vals, rec.Value)
	if len(rec.Value) >= 4 && rec.Value[:4] == "fail" {
		return errors.New("cannot process " + rec.Value)
	}
	if len(rec.Value) >= 5 && rec.Value[:5] == "panic" {
		panic("boom: " + rec.Value)
	}
	return nil
}

func (h *recorder) offsets(p int32) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[p])
}

func (h *recorder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.vals)
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
