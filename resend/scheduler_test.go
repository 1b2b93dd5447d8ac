package resend

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// Two schedulers on one database send each of 1,000 due failures exactly once.
func TestTwoSchedulersSendEachRowOnce(t *testing.T) {
	t.Parallel()
	const (
		topic = "orders"
		n     = 1000
	)
	e := newEnv(t, map[string]int{topic: 4})
	e.insertDue(t, topic, n, 100)
	var scheds []*Scheduler
	for range 2 {
		scheds = append(scheds, e.scheduler(t, func(c *Config) {
			c.Now = time.Now
			c.DisableAutomatic, c.Interval = false, 10*time.Millisecond
			c.BatchSize = 40
			c.Concurrency = 3
		}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range scheds {
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	waitFor(t, time.Minute, "all failures RESENT", func() bool { return e.countState(t, redrive.StateResent) == n })
	cancel()
	wg.Wait()

	records := e.cluster.ConsumeN(t, topic, n, time.Minute)
	seen := make(map[string]int, n)
	for _, m := range records {
		for _, h := range m.Headers {
			if h.Key == avro.HeaderOrigin {
				seen[string(h.Value)]++
			}
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct causing messages on the topic, want %d", len(seen), n)
	}
	for origin, c := range seen {
		if c != 1 {
			t.Errorf("%s sent %d times", origin, c)
		}
	}
	if got := e.records(topic); got != n {
		t.Errorf("topic holds %d records, want %d", got, n)
	}
	var perInstance []float64
	for _, s := range scheds {
		perInstance = append(perInstance, testutil.ToFloat64(s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeResent))))
	}
	if perInstance[0]+perInstance[1] != n {
		t.Errorf("resend metrics %v, want a total of %d", perInstance, n)
	}
	t.Logf("resent per instance: %v", perInstance)
}

// A broker that refuses the records leaves the failure due with the error recorded and its
// next attempt pushed back; it is resent later, once.
func TestBrokerFailureKeepsRowDue(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, func(c *Config) {
		c.SendTimeout = time.Second
		c.SendBackoff = Backoff{Base: 10 * time.Second, Jitter: -1}
	})
	ctx := context.Background()
	id := e.insertFailure(t, row{Topic: topic, Attempt: 3})

	fault := e.cluster.FailProduce(topic, 0)
	st, err := s.round(ctx)
	if err != nil || st.failed != 1 || st.resent != 0 {
		t.Fatalf("round with broker failing: %+v, %v", st, err)
	}
	now := e.clock.Now()
	f := e.failure(t, id)
	if f.State != redrive.StateRetryPending || f.ResendFailures != 1 || f.LastResendError == nil || f.LeaseOwner != nil {
		t.Fatalf("after failed resend: %+v", f)
	}
	if !f.NextAttemptAt.Equal(now.Add(10 * time.Second)) {
		t.Fatalf("next attempt %v, want %v", f.NextAttemptAt, now.Add(10*time.Second))
	}
	t.Logf("recorded error: %s", *f.LastResendError)
	if got := testutil.ToFloat64(s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeFailed))); got != 1 {
		t.Errorf("failed resends metric %v, want 1", got)
	}
	var attempt int
	if err := e.pool.QueryRow(ctx, `SELECT attempt FROM failures WHERE id = $1`, id).Scan(&attempt); err != nil || attempt != 3 {
		t.Errorf("attempt %d (%v): a resend failure must not count as a failure of the message", attempt, err)
	}
	fault.Remove()

	// Not due yet: nothing happens.
	if st, err := s.round(ctx); err != nil || st.claimed != 0 {
		t.Fatalf("round before the next attempt: %+v, %v", st, err)
	}
	e.clock.Advance(11 * time.Second)
	if st, err := s.round(ctx); err != nil || st.resent != 1 {
		t.Fatalf("round after the broker recovered: %+v, %v", st, err)
	}
	if f := e.failure(t, id); f.State != redrive.StateResent || f.ResendFailures != 1 {
		t.Fatalf("after the resend: %+v", f)
	}
	if got := e.records(topic); got != 1 {
		t.Fatalf("topic holds %d records, want exactly 1", got)
	}
}

// A due failure whose attempt number reached the policy's maximum becomes PERMANENT with reason
// "retries exhausted" and is not sent.
func TestRetriesExhaustedBecomesPermanent(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, nil) // default policy: 15 attempts
	last := e.insertFailure(t, row{Topic: topic, Attempt: 14})
	exhausted := e.insertFailure(t, row{Topic: topic, Attempt: 15})

	st, err := s.round(context.Background())
	if err != nil || st.resent != 1 || st.exhausted != 1 {
		t.Fatalf("round: %+v, %v", st, err)
	}
	if f := e.failure(t, last); f.State != redrive.StateResent {
		t.Errorf("attempt 14: %s, want RESENT", f.State)
	}
	f := e.failure(t, exhausted)
	if f.State != redrive.StatePermanent || f.StateReason == nil || *f.StateReason != ReasonRetriesExhausted || f.LeaseOwner != nil {
		t.Errorf("attempt 15: %+v, want PERMANENT with reason %q", f, ReasonRetriesExhausted)
	}
	if got := e.records(topic); got != 1 {
		t.Errorf("topic holds %d records, want 1", got)
	}
	if got := testutil.ToFloat64(s.metrics.resends.WithLabelValues(TriggerAuto, string(redrive.OutcomeExhausted))); got != 1 {
		t.Errorf("exhausted metric %v, want 1", got)
	}
}

// A claim whose owner died returns when its lease expires; a live lease keeps it.
func TestExpiredLeaseReturnsClaim(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, nil)
	now := e.clock.Now()
	until := now.Add(time.Minute)
	dead := "crashed-instance"
	id := e.insertFailure(t, row{Topic: topic, LeaseOwner: &dead, LeaseUntil: &until})

	if st, err := s.round(context.Background()); err != nil || st.claimed != 0 {
		t.Fatalf("round under a live lease: %+v, %v", st, err)
	}
	e.clock.Advance(2 * time.Minute)
	if st, err := s.round(context.Background()); err != nil || st.resent != 1 {
		t.Fatalf("round after the lease expired: %+v, %v", st, err)
	}
	if f := e.failure(t, id); f.State != redrive.StateResent {
		t.Fatalf("state %s, want RESENT", f.State)
	}
}

func TestSchedulerLag(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]int{"orders": 1})
	s := e.scheduler(t, nil)
	now := e.clock.Now()
	due := now.Add(-90 * time.Second)
	later := now.Add(time.Hour)
	e.insertFailure(t, row{NextAttemptAt: &due})
	e.insertFailure(t, row{NextAttemptAt: &later})
	s.observeLag(context.Background())
	if got := testutil.ToFloat64(s.metrics.lag); got != 90 {
		t.Fatalf("lag %v s, want 90", got)
	}
	if _, err := s.round(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.observeLag(context.Background())
	if got := testutil.ToFloat64(s.metrics.lag); got != 0 {
		t.Fatalf("lag %v s after the round, want 0", got)
	}
	if n := testutil.CollectAndCount(s.metrics.claim); n != 1 {
		t.Fatalf("claim histogram: %d series", n)
	}
}

// Run returns when its context ends; the resender is closed afterwards.
func TestRunStopsAndClosesResender(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]int{"orders": 1})
	s := e.scheduler(t, func(c *Config) { c.DisableAutomatic, c.Interval, c.Now = false, 10*time.Millisecond, time.Now })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Run: %v", err)
	}
	res, err := s.Resender().ResendIDs(context.Background(), nil, ManualRequest{Principal: "alice"})
	if err != redrive.ErrClosed || len(res.Items) != 0 {
		t.Fatalf("ResendIDs after Run: %+v, %v", res, err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	e := &env{clock: newClock()}
	st := &store.Store{}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no store", Config{Brokers: "x"}, "Store is required"},
		{"no brokers", Config{Store: st}, "Brokers is required"},
		{"acks weakened", Config{Store: st, Brokers: "x", Producer: kafka.ConfigMap{"acks": "1"}}, "acks=all"},
		{"idempotence off", Config{Store: st, Brokers: "x", Producer: kafka.ConfigMap{"enable.idempotence": false}}, "idempotent"},
		{"lease too short", Config{Store: st, Brokers: "x", Lease: time.Second, SendTimeout: time.Second}, "Lease"},
		{"bad backoff", Config{Store: st, Brokers: "x", Backoff: Backoff{Factor: 0.5}}, "Factor"},
		{"bad partitioning", Config{Store: st, Brokers: "x", Partitioning: 7}, "Partitioning"},
		{"negative age", Config{Store: st, Brokers: "x", Housekeeping: HousekeepingConfig{ResolvedAge: -1}}, "ages"},
		{"negative rate", Config{Store: st, Brokers: "x", ManualRate: -1}, "ManualRate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), "invalid config") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an invalid config error naming %q", err, tt.want)
			}
		})
	}
	cfg, err := Config{Store: st, Brokers: "x", Now: e.clock.Now}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Interval != time.Second || cfg.BatchSize != 500 || cfg.Lease != 2*time.Minute || cfg.ServiceName != "redrive" ||
		cfg.Partitioner != "murmur2_random" || cfg.Housekeeping.ResolvedAge != 30*24*time.Hour ||
		cfg.Housekeeping.PermanentAge != 180*24*time.Hour || cfg.Backoff.MaxAttempts != 15 || cfg.ManualBurst != 200 {
		t.Fatalf("defaults: %+v", cfg)
	}
	pc := cfg.producerConfig()
	if pc["enable.idempotence"] != true || pc["acks"] != "all" || pc["bootstrap.servers"] != "x" {
		t.Fatalf("producer config: %v", pc)
	}
}

func TestSendBackoffNeverExhausts(t *testing.T) {
	t.Parallel()
	b := DefaultSendBackoff()
	b.Rand = func() float64 { return 0.5 }
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for n, want := range map[int]time.Duration{0: 10 * time.Second, 1: 20 * time.Second, 3: 80 * time.Second, 20: 15 * time.Minute, 1000: 15 * time.Minute} {
		if got := retryAt(b, n, now).Sub(now); got != want {
			t.Errorf("after %d failed resends: %s, want %s", n, got, want)
		}
	}
	// A custom policy with few attempts still never exhausts: it stays at its cap.
	custom := Backoff{Base: time.Second, Max: time.Minute, MaxAttempts: 2, Jitter: -1}
	if got := retryAt(custom, 50, now).Sub(now); got != time.Minute {
		t.Errorf("custom policy past its attempts: %s, want the cap", got)
	}
}

// A producer that failed fatally (an idempotence violation) is replaced before the next batch.
func TestFatalProducerErrorReplacesProducer(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 1})
	s := e.scheduler(t, nil)
	s.pub.pubs[store.DefaultCluster].pub.mu.RLock()
	old := s.pub.pubs[store.DefaultCluster].pub.producer
	s.pub.pubs[store.DefaultCluster].pub.mu.RUnlock()
	old.TestFatalError(kafka.ErrOutOfOrderSequenceNumber, "injected by the test")
	waitFor(t, 10*time.Second, "the fatal error", func() bool { return old.GetFatalError() != nil })

	id := e.insertFailure(t, row{Topic: topic})
	if st, err := s.round(context.Background()); err != nil || st.resent != 1 {
		t.Fatalf("round after the fatal error: %+v, %v", st, err)
	}
	if f := e.failure(t, id); f.State != redrive.StateResent {
		t.Fatalf("state %s, want RESENT", f.State)
	}
	s.pub.pubs[store.DefaultCluster].pub.mu.RLock()
	replaced := s.pub.pubs[store.DefaultCluster].pub.producer != old
	s.pub.pubs[store.DefaultCluster].pub.mu.RUnlock()
	if !replaced {
		t.Fatal("the producer was not replaced")
	}
}

// A scheduler with DisableAutomatic resends nothing by itself, while its housekeeping runs; a
// negative interval is read as disabled, as before the explicit fields.
func TestDisableAutomatic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]int{"orders": 1})
	now := e.clock.Now()
	ago := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }
	due := e.insertFailure(t, row{NextAttemptAt: ago(time.Hour)})
	expired := e.insertFailure(t, row{State: redrive.StateResent, CreatedAt: *ago(40 * 24 * time.Hour), ResentAt: ago(31 * 24 * time.Hour)})
	s := e.scheduler(t, func(c *Config) {
		c.DisableAutomatic, c.Interval = true, time.Millisecond
		c.Housekeeping = HousekeepingConfig{Interval: time.Millisecond}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	// Housekeeping and rounds share Run: once housekeeping has deleted the expired failure,
	// rounds at the same interval would have had their turns too.
	waitFor(t, time.Minute, "housekeeping", func() bool {
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM failures WHERE id = $1`, expired).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if f := e.failure(t, due); f.State != redrive.StateRetryPending || e.records("orders") != 0 {
		t.Errorf("due failure %s, %d records sent; want it RETRY_PENDING and nothing sent", f.State, e.records("orders"))
	}

	for _, c := range []Config{
		{Store: e.store, Brokers: "x", Interval: -1, Housekeeping: HousekeepingConfig{Interval: -1}},
		{Store: e.store, Brokers: "x", DisableAutomatic: true, Housekeeping: HousekeepingConfig{Disable: true}},
	} {
		cfg, err := c.withDefaults()
		if err != nil || !cfg.DisableAutomatic || !cfg.Housekeeping.Disable || cfg.Interval <= 0 || cfg.Housekeeping.Interval <= 0 {
			t.Errorf("withDefaults(%+v) = %+v, %v; want both disabled, with positive intervals", c, cfg, err)
		}
	}
}
