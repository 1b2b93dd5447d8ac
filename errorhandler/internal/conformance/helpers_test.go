package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
	"github.com/redrive/redrive/errorhandler/franz"
	"github.com/redrive/redrive/internal/testkit"
)

const (
	testTopic    = "orders"
	testErrTopic = "errors"
	waitTimeout  = 30 * time.Second
)

// adapter names a Kafka client adapter under test.
type adapter string

const (
	adapterConfluent adapter = "confluent"
	adapterFranz     adapter = "franz"
)

var adapters = []adapter{adapterConfluent, adapterFranz}

// forEachAdapter runs test once per adapter, in parallel subtests.
func forEachAdapter(t *testing.T, test func(t *testing.T, a adapter)) {
	t.Helper()
	t.Parallel()
	for _, a := range adapters {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			test(t, a)
		})
	}
}

// runner is what both adapters' Runners offer.
type runner interface {
	Run(ctx context.Context) error
	Health() eh.Health
	Release(ctx context.Context, topic string, partition int32, offset int64, action eh.Action) error
	HealthHandler() http.Handler
}

// tuning are per-test client settings, expressed for both adapters.
type tuning struct {
	// deliveryTimeout bounds one MPFE produce attempt inside the client (0: the default;
	// franz-go allows no less than 1s).
	deliveryTimeout time.Duration
	// sessionTimeout is the group session timeout (0: 6s); the confluent consumer's
	// max.poll.interval.ms is set to it as well, so a stalled poll loop would be noticed.
	sessionTimeout time.Duration
	// instanceID is the consumer's GroupInstanceID (empty: dynamic membership).
	instanceID string
}

// env is one test's Kafka cluster with an input topic and an error topic, and the adapter
// under test.
type env struct {
	t   *testing.T
	a   adapter
	k   *testkit.Cluster
	reg *prometheus.Registry
	tun tuning
}

func newEnv(t *testing.T, a adapter, partitions int) *env {
	t.Helper()
	k := testkit.Kafka(t)
	k.CreateTopic(t, testTopic, partitions)
	k.CreateTopic(t, testErrTopic, 3)
	return &env{t: t, a: a, k: k, reg: prometheus.NewRegistry()}
}

func testLogger(t *testing.T) *slog.Logger {
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

// config returns a runner config for the env.
func (e *env) config(group string, h eh.Handler[[]byte, string]) eh.Config[[]byte, string] {
	return eh.Config[[]byte, string]{
		GroupID:      group,
		Topics:       []string{testTopic},
		System:       "test-system",
		Service:      "test-service",
		KeyDecoder:   eh.Bytes(),
		ValueDecoder: stringDecoder(),
		Handler:      h,
		DeadLetter: eh.DeadLetterConfig{
			ErrorTopic:   testErrTopic,
			RetryBackoff: 20 * time.Millisecond,
		},
		CommitInterval:  50 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second,
		Logger:          testLogger(e.t).With("adapter", string(e.a)),
		Metrics:         e.reg,
	}
}

// confluentSettings are quiet, fast librdkafka settings for kfake.
func (e *env) confluentSettings(bootstrap string) confluent.Settings {
	pc := kafka.ConfigMap{"linger.ms": 1, "log_level": 3}
	if e.tun.deliveryTimeout > 0 {
		pc["message.timeout.ms"] = int(e.tun.deliveryTimeout / time.Millisecond)
		pc["retry.backoff.ms"] = 20
		pc["log_level"] = 0
	}
	cc := kafka.ConfigMap{
		"session.timeout.ms":    6000,
		"heartbeat.interval.ms": 200,
		"fetch.wait.max.ms":     20,
		"log_level":             3,
	}
	if e.tun.sessionTimeout > 0 {
		cc["session.timeout.ms"] = int(e.tun.sessionTimeout.Milliseconds())
		cc["max.poll.interval.ms"] = int(e.tun.sessionTimeout.Milliseconds())
	}
	return confluent.Settings{Brokers: bootstrap, GroupInstanceID: e.tun.instanceID, ConsumerConfig: cc, ProducerConfig: pc}
}

// franzSettings are fast kgo settings for kfake.
func (e *env) franzSettings(bootstrap string) franz.Settings {
	po := []kgo.Opt{kgo.ProducerLinger(time.Millisecond)}
	if e.tun.deliveryTimeout > 0 {
		po = append(po, kgo.RecordDeliveryTimeout(max(time.Second, e.tun.deliveryTimeout)), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	}
	return franz.Settings{
		Brokers:         strings.Split(bootstrap, ","),
		GroupInstanceID: e.tun.instanceID,
		ConsumerOpts: []kgo.Opt{
			kgo.SessionTimeout(cmp.Or(e.tun.sessionTimeout, 6*time.Second)),
			kgo.HeartbeatInterval(200 * time.Millisecond),
			kgo.FetchMaxWait(20 * time.Millisecond),
		},
		ProducerOpts: po,
	}
}

// newRunner builds a runner of the env's adapter.
func newRunner[K, V any](e *env, cfg eh.Config[K, V]) (runner, error) {
	return newRunnerAt(e, cfg, e.k.Bootstrap())
}

// newRunnerAt builds a runner of the env's adapter for the brokers of bootstrap.
func newRunnerAt[K, V any](e *env, cfg eh.Config[K, V], bootstrap string) (runner, error) {
	switch e.a {
	case adapterConfluent:
		s := e.confluentSettings(bootstrap)
		return confluent.New(cfg, s)
	case adapterFranz:
		return franz.New(cfg, e.franzSettings(bootstrap))
	}
	return nil, fmt.Errorf("unknown adapter %q", e.a)
}

// stringDecoder decodes UTF-8 text; a value starting with "bad" is undecodable.
func stringDecoder() eh.Decoder[string] {
	return eh.DecoderFunc[string](func(_ string, data []byte) (string, error) {
		if len(data) >= 3 && string(data[:3]) == "bad" {
			return "", errors.New("undecodable value")
		}
		return string(data), nil
	})
}

// started is a runner running in the background.
type started struct {
	r      runner
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func (e *env) start(cfg eh.Config[[]byte, string]) *started {
	e.t.Helper()
	return startRunner(e, cfg)
}

func startRunner[K, V any](e *env, cfg eh.Config[K, V]) *started {
	e.t.Helper()
	r, err := newRunner(e, cfg)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{r: r, cancel: cancel, done: make(chan error, 1)}
	log := cfg.Logger
	go func() {
		err := r.Run(ctx)
		if err != nil && log != nil {
			log.Error("Run returned", "error", err)
		}
		s.done <- err
	}()
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

// mpfes reads n MPFEs from the error topic and decodes them with the avro package, sorted by
// the failed record's partition and offset.
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
	slices.SortStableFunc(out, func(a, b *avro.Event) int {
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

// failures returns the failures counter of the input topic for phase and outcome.
func (e *env) failures(phase, outcome string) float64 {
	return metricValue(e.reg, "redrive_errorhandler_failures_total", map[string]string{"phase": phase, "outcome": outcome, "topic": testTopic})
}

// metricValue returns the value of the counter or gauge name with the given labels (all of
// them must match), or 0 when there is none.
func metricValue(reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// recorder is a handler that records what it saw and fails values starting with "fail".
type recorder struct {
	mu   sync.Mutex
	seen map[int32][]int64
	vals []string
}

func newRecorder() *recorder { return &recorder{seen: map[int32][]int64{}} }

func (h *recorder) Handle(_ context.Context, rec eh.Record[[]byte, string]) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[rec.Message.Partition] = append(h.seen[rec.Message.Partition], rec.Message.Offset)
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

func (h *recorder) values() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.vals)
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
