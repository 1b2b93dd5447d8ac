package engine

import (
	"strconv"
	"sync"
	"time"
)

// sampleLen is the number of payload bytes a log line may show.
const sampleLen = 32

// sample returns a short, escaped sample of b for logs: never more than sampleLen bytes.
func sample(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	if len(b) <= sampleLen {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:sampleLen])) + "... (" + strconv.Itoa(len(b)) + " bytes)"
}

// throttle lets one log line per key through per interval and counts the rest.
type throttle struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last map[string]throttleState
}

type throttleState struct {
	at         time.Time
	suppressed int
}

func newThrottle(interval time.Duration, now func() time.Time) *throttle {
	return &throttle{interval: interval, now: now, last: map[string]throttleState{}}
}

// allow reports whether a line for key may be logged now, and how many were suppressed since
// the last one that was.
func (t *throttle) allow(key string) (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	st, ok := t.last[key]
	if ok && now.Sub(st.at) < t.interval {
		st.suppressed++
		t.last[key] = st
		return false, 0
	}
	t.last[key] = throttleState{at: now}
	return true, st.suppressed
}
