package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	eh "github.com/redrive/redrive/errorhandler"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/redrive/redrive/avro"
)

// TestNoLossWhileErrorTopicFails makes every produce request to the error topic fail for a
// while: the partitions wait uncommitted and health says so; once the topic accepts writes,
// every failed record ends up exactly once as an MPFE with its exact bytes.
func TestNoLossWhileErrorTopicFails(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 2)
		var sent []*kafka.Message
		for p := int32(0); p < 2; p++ {
			vals := values("ok", 40)
			for i := 3; i < 40; i += 4 {
				vals[i] = fmt.Sprintf("fail%d", i)
			}
			msgs := e.produce(p, vals...)
			sent = append(sent, msgs...)
		}
		fault := e.k.FailProduce(testErrTopic, -1)
		h := newRecorder()
		cfg := e.config("noloss", h)
		cfg.ProcessPolicy = eh.DeadLetter
		e.tun.deliveryTimeout = 300 * time.Millisecond
		cfg.DeadLetter.RetryBackoff = 10 * time.Millisecond
		cfg.DeadLetter.MaxRetryBackoff = 50 * time.Millisecond
		s := e.start(cfg)

		waitFor(t, "several failed attempts, partitions waiting", func() bool {
			for p := int32(0); p < 2; p++ {
				if c := e.committed("noloss", p); c > 3 {
					t.Fatalf("partition %d committed %d while the MPFE of offset 3 was not written", p, c)
				}
			}
			hl := s.r.Health()
			return metricValue(e.reg, "redrive_errorhandler_dead_letter_produce_failures_total", map[string]string{"error_topic": testErrTopic}) >= 6 &&
				len(hl.Waiting) == 2 && hl.Status == "degraded" && hl.DeadLetter != nil && hl.DeadLetter.Retrying > 0 &&
				metricValue(e.reg, "redrive_errorhandler_dead_letter_blocked_partitions", nil) == 2
		})
		// Each waiting partition names the lowest of its records whose MPFE attempt has failed:
		// offset 3, or a later failing record when 3's first attempt is still in flight.
		hl := s.r.Health()
		if !strings.Contains(hl.Reason, "cannot be written") {
			t.Errorf("health while the error topic fails: %+v", hl)
		}
		for _, w := range hl.Waiting {
			if w.Offset%4 != 3 || w.Phase != eh.PhaseProcess || w.Error == "" {
				t.Errorf("waiting partition while the error topic fails: %+v", w)
			}
		}
		if n := e.errTopicCount(); n != 0 {
			t.Fatalf("error topic has %d records while failing", n)
		}
		fault.Remove()

		for p := int32(0); p < 2; p++ {
			waitFor(t, "committed to the end", func() bool { return e.committed("noloss", p) == 40 })
		}
		if hl := s.r.Health(); hl.Status != "ok" || len(hl.Waiting) != 0 {
			t.Errorf("health after recovery: %+v", hl)
		}
		if err := s.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if n := e.errTopicCount(); n != 20 {
			t.Fatalf("error topic has %d records, want exactly 20", n)
		}
		evs := e.mpfes(20)
		seen := map[string]bool{}
		for _, ev := range evs {
			ref := ev.References.Message
			id := fmt.Sprintf("%d/%d", ref.Partition, ref.Offset)
			if seen[id] {
				t.Errorf("record %s dead-lettered twice", id)
			}
			seen[id] = true
			orig := sent[int(ref.Partition)*40+int(ref.Offset)]
			checkMPFE(t, ev, orig, eh.PhaseProcess)
		}
		if metricValue(e.reg, "redrive_errorhandler_dead_letter_blocked_partitions", nil) != 0 || metricValue(e.reg, "redrive_errorhandler_dead_letter_in_flight", nil) != 0 {
			t.Errorf("blocked=%v inFlight=%v after recovery", metricValue(e.reg, "redrive_errorhandler_dead_letter_blocked_partitions", nil), metricValue(e.reg, "redrive_errorhandler_dead_letter_in_flight", nil))
		}
	})
}

func TestFloodGuard(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		vals := values("fail", 20)
		vals[0] = "ok0"
		e.produce(0, vals...)
		h := newRecorder()
		cfg := e.config("flood", h)
		cfg.ProcessPolicy = eh.DeadLetter
		cfg.FloodThreshold = 5
		s := e.start(cfg)
		waitFor(t, "flood halt", func() bool { return len(s.r.Health().Halted) == 1 })
		hp := s.r.Health().Halted[0]
		if hp.Reason != eh.ReasonFlood || hp.Offset != 6 {
			t.Fatalf("halted %+v, want reason flood at offset 6", hp)
		}
		waitFor(t, "committed up to the flood", func() bool { return e.committed("flood", 0) == 6 })
		if n := e.errTopicCount(); n != 5 {
			t.Errorf("%d MPFEs, want 5", n)
		}
		// Releasing with dead-letter counts the flood from zero again.
		if err := s.r.Release(context.Background(), testTopic, 0, 6, eh.ActionDeadLetter); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "second flood halt", func() bool {
			hs := s.r.Health().Halted
			return len(hs) == 1 && hs[0].Offset == 12
		})
		if err := s.r.Release(context.Background(), testTopic, 0, 6, eh.ActionSkip); !errors.Is(err, eh.ErrWrongOffset) {
			t.Errorf("release at a stale offset: %v, want eh.ErrWrongOffset", err)
		}
	})
}

func TestRestartHaltsAgainAtTheSameRecord(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		vals := values("ok", 10)
		vals[4] = "fail4"
		e.produce(0, vals...)
		for run := 0; run < 2; run++ {
			h := newRecorder()
			s := e.start(e.config("restart", h))
			waitFor(t, "halted", func() bool { return len(s.r.Health().Halted) == 1 })
			if hp := s.r.Health().Halted[0]; hp.Offset != 4 {
				t.Fatalf("run %d halted at %d, want 4", run, hp.Offset)
			}
			if err := s.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if c := e.committed("restart", 0); c != 4 {
				t.Fatalf("run %d: committed %d, want 4", run, c)
			}
			want := "[0 1 2 3 4]"
			if run == 1 {
				want = "[4]"
			}
			if got := fmt.Sprint(h.offsets(0)); got != want {
				t.Errorf("run %d handled %s, want %s", run, got, want)
			}
		}
	})
}

func TestClassificationAndPanics(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.produce(0, "p1-a", "p1-b", "p2", "e1", "e2", "perm")
		h := eh.HandlerFunc[[]byte, string](func(_ context.Context, rec eh.Record[[]byte, string]) error {
			switch {
			case strings.HasPrefix(rec.Value, "p1"):
				panicSiteOne(rec.Value)
			case rec.Value == "p2":
				panicSiteTwo()
			case rec.Value == "e1":
				return fmt.Errorf("book order: %w", eh.Temporary(errors.New("db down"), "DB_DOWN"))
			case rec.Value == "e2":
				return fmt.Errorf("book order %s: %w", rec.Value, eh.Temporary(errors.New("db down, again"), "DB_DOWN"))
			case rec.Value == "perm":
				return fmt.Errorf("validate: %w", invalidOrder{"amount < 0"})
			}
			return nil
		})
		cfg := e.config("classify", h)
		cfg.ProcessPolicy = eh.DeadLetter
		s := e.start(cfg)
		waitFor(t, "committed to the end", func() bool { return e.committed("classify", 0) == 6 })
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		evs := e.mpfes(6)
		hash := func(i int) string { return *evs[i].Payload.StackTraceHash }
		for i := 0; i < 3; i++ {
			et := evs[i].References.ErrorType
			if et.Code != eh.CodePanic || et.Temporality != avro.Unknown {
				t.Errorf("panic %d classified %+v", i, et)
			}
			st := *evs[i].Payload.StackTrace
			if !strings.Contains(st, "goroutine ") || !strings.Contains(st, "panicSite") {
				t.Errorf("panic %d stack trace lacks the goroutine stack:\n%s", i, st)
			}
		}
		if !strings.HasPrefix(evs[0].Payload.ErrorMessage, "panic: boom p1-a") {
			t.Errorf("panic message %q", evs[0].Payload.ErrorMessage)
		}
		if hash(0) != hash(1) {
			t.Errorf("two panics at the same site hash differently")
		}
		if hash(0) == hash(2) {
			t.Errorf("panics at different sites hash the same")
		}
		for i := 3; i < 5; i++ {
			if et := evs[i].References.ErrorType; et.Code != "DB_DOWN" || et.Temporality != avro.Temporary {
				t.Errorf("wrapped temporary error %d classified %+v", i, et)
			}
		}
		if hash(3) != hash(4) || hash(3) == hash(0) {
			t.Errorf("errors of the same types with different messages must share a hash, and differ from panics")
		}
		if !strings.Contains(*evs[3].Payload.StackTrace, "caused by") {
			t.Errorf("error chain not described:\n%s", *evs[3].Payload.StackTrace)
		}
		if et := evs[5].References.ErrorType; et.Code != "INVALID_ORDER" || et.Temporality != avro.Permanent {
			t.Errorf("custom Classified error classified %+v", et)
		}
		if hash(5) == hash(3) {
			t.Errorf("different error types share a hash")
		}
	})
}

//go:noinline
func panicSiteOne(v string) { panic("boom " + v) }

//go:noinline
func panicSiteTwo() {
	var m map[string]int
	m["x"] = 1 // a runtime error: assignment to entry in nil map
}

// invalidOrder is a user error type that classifies itself.
type invalidOrder struct{ why string }

func (e invalidOrder) Error() string                 { return "invalid order: " + e.why }
func (e invalidOrder) ErrorCode() string             { return "INVALID_ORDER" }
func (e invalidOrder) Temporality() avro.Temporality { return avro.Permanent }

func TestRebalanceWhenASecondConsumerJoins(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 4)
		produce := func(base int) {
			for p := int32(0); p < 4; p++ {
				vals := make([]string, 50)
				for i := range vals {
					vals[i] = fmt.Sprintf("ok-%d", base+i)
					if (base+i)%10 == 9 {
						vals[i] = fmt.Sprintf("fail-%d", base+i)
					}
				}
				e.produce(p, vals...)
			}
		}
		produce(0)
		slow := func(h *recorder) eh.Handler[[]byte, string] {
			return eh.HandlerFunc[[]byte, string](func(ctx context.Context, rec eh.Record[[]byte, string]) error {
				time.Sleep(200 * time.Microsecond) // stands for real work, so the join lands mid-stream
				return h.Handle(ctx, rec)
			})
		}
		ha, hb := newRecorder(), newRecorder()
		cfgA := e.config("rebalance", slow(ha))
		cfgA.ProcessPolicy = eh.DeadLetter
		cfgA.Logger = cfgA.Logger.With("runner", "A")
		ra := e.start(cfgA)
		waitFor(t, "A handled some records", func() bool { return ha.count() >= 20 })
		cfgB := e.config("rebalance", slow(hb))
		cfgB.ProcessPolicy = eh.DeadLetter
		cfgB.Logger = cfgB.Logger.With("runner", "B")
		rb := e.start(cfgB)
		// Once both members hold partitions, the second half arrives: B has records to handle.
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		waitFor(t, "B assigned", func() bool {
			gi, err := e.k.Fake().WaitGroupStable(ctx, "rebalance", 2)
			return err == nil && gi != nil
		})
		produce(50)
		waitFor(t, "B got records", func() bool { return hb.count() > 0 })
		for p := int32(0); p < 4; p++ {
			waitFor(t, "committed to the end", func() bool { return e.committed("rebalance", p) == 100 })
		}
		if err := ra.stop(); err != nil {
			t.Errorf("Run A: %v", err)
		}
		if err := rb.stop(); err != nil {
			t.Errorf("Run B: %v", err)
		}
		handled := map[string]int{}
		for _, h := range []*recorder{ha, hb} {
			for _, v := range h.vals {
				handled[v]++
			}
		}
		for i := 0; i < 100; i++ {
			if i%10 != 9 && handled[fmt.Sprintf("ok-%d", i)] != 4 {
				t.Errorf("ok-%d handled %d times, want once per partition (4)", i, handled[fmt.Sprintf("ok-%d", i)])
			}
		}
		// 10 failing records per partition: each dead-lettered exactly once.
		if n := e.errTopicCount(); n != 40 {
			t.Errorf("error topic has %d MPFEs, want 40", n)
		}
		seen := map[string]bool{}
		for _, ev := range e.mpfes(40) {
			id := fmt.Sprintf("%d/%d", ev.References.Message.Partition, ev.References.Message.Offset)
			if seen[id] || !bytes.HasPrefix(ev.Payload.OriginalMessage, []byte("fail-")) {
				t.Errorf("unexpected MPFE for %s: %q", id, ev.Payload.OriginalMessage)
			}
			seen[id] = true
		}
	})
}

func TestGracefulShutdownCommitsOnlyWhatIsFinal(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		e.produce(0, values("fail", 2000)...)
		h := newRecorder()
		cfg := e.config("shutdown", h)
		cfg.ProcessPolicy = eh.DeadLetter
		cfg.FloodThreshold = -1
		cfg.CommitInterval = time.Hour // only the shutdown commits
		s := e.start(cfg)
		var produced atomic.Int64
		waitFor(t, "MPFEs flowing", func() bool {
			produced.Store(int64(metricValue(e.reg, "redrive_errorhandler_dead_letter_produced_total", map[string]string{"error_topic": testErrTopic})))
			return produced.Load() >= 100
		})
		if err := s.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		c := e.committed("shutdown", 0)
		n := e.errTopicCount()
		if c <= 0 || c > 2000 {
			t.Fatalf("committed %d after shutdown", c)
		}
		if n != c {
			t.Fatalf("committed %d but the error topic holds %d MPFEs: shutdown must wait for in-flight MPFEs and commit exactly what is final", c, n)
		}
		for i, ev := range e.mpfes(int(n)) {
			if ev.References.Message.Offset != int64(i) {
				t.Fatalf("MPFE %d is for offset %d", i, ev.References.Message.Offset)
			}
		}
	})
}
