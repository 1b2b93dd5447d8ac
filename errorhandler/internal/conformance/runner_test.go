package conformance

import (
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
