package conformance

import (
	"fmt"
	"time"

	eh "github.com/redrive/redrive/errorhandler"
	"slices"
	"testing"
)

func TestHappyPathHandlesInOrderAndCommits(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 3)
		for p := int32(0); p < 3; p++ {
			e.produce(p, values("ok", 100)...)
		}
		h := newRecorder()
		s := e.start(e.config("happy", h))
		waitFor(t, "300 records handled", func() bool { return h.count() == 300 })
		for p := int32(0); p < 3; p++ {
			got := h.offsets(p)
			if !slices.IsSorted(got) || len(got) != 100 {
				t.Errorf("partition %d: offsets %v, want 0..99 in order", p, got)
			}
			waitFor(t, "committed to the end", func() bool { return e.committed("happy", p) == 100 })
		}
		if err := s.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if n := e.errTopicCount(); n != 0 {
			t.Errorf("error topic has %d records, want 0", n)
		}
	})
}

// TestFlowControlPausesAndResumesWithoutLoss: with a tiny MaxBuffered, partitions are paused
// and resumed over and over for flow control (and one waits on a failing error topic); every
// record is still handled exactly once, in order.
func TestFlowControlPausesAndResumesWithoutLoss(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 2)
		const n = 1500
		for p := int32(0); p < 2; p++ {
			vals := values("ok", n)
			if p == 1 {
				for i := 100; i < n; i += 100 {
					vals[i] = fmt.Sprintf("fail%d", i)
				}
			}
			e.produce(p, vals...)
		}
		fault := e.k.FailProduce(testErrTopic, 5) // the first MPFEs wait for the error topic
		defer fault.Remove()
		// The clients give up an attempt quickly; the middleware retries it (a loaded machine
		// once kept kgo's own retries of the failed batch going for its whole 30s default).
		e.tun.deliveryTimeout = 300 * time.Millisecond
		h := newRecorder()
		cfg := e.config("flow", h)
		cfg.ProcessPolicy = eh.DeadLetter
		cfg.MaxBuffered = 20
		cfg.Concurrency = 1
		s := e.start(cfg)
		for p := int32(0); p < 2; p++ {
			waitFor(t, "committed to the end", func() bool { return e.committed("flow", p) == n })
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			got := h.offsets(p)
			if len(got) != n || !slices.IsSorted(got) || got[0] != 0 || got[n-1] != n-1 {
				t.Errorf("partition %d: %d records handled (first %v), want each of %d once, in order", p, len(got), got[:min(len(got), 5)], n)
			}
		}
		if c := e.errTopicCount(); c != 14 {
			t.Errorf("%d MPFEs, want 14", c)
		}
	})
}
