package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/redrive/redrive/store"
)

// statsJSON is the body of GET /stats.
type statsJSON struct {
	// AsOf is when the counts were taken; they are at most about StatsMaxAge old.
	AsOf               time.Time        `json:"as_of"`
	Total              int64            `json:"total"`
	ByState            map[string]int64 `json:"by_state"`
	ByTemporality      map[string]int64 `json:"by_temporality"`
	ByTopic            map[string]int64 `json:"by_topic"`
	ByPublisherService map[string]int64 `json:"by_publisher_service"`
	// OldestPending is the oldest RETRY_PENDING failure; null when none.
	OldestPending *oldestJSON `json:"oldest_pending"`
	// OldestPermanent is the oldest PERMANENT failure; null when none.
	OldestPermanent *oldestJSON `json:"oldest_permanent"`
}

type oldestJSON struct {
	CreatedAt  time.Time `json:"created_at"`
	AgeSeconds float64   `json:"age_seconds"`
}

// getStats serves GET /stats.
func (a *api) getStats(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r, nil); err != nil {
		a.fail(w, r, err)
		return
	}
	ctx, cancel := a.queryContext(r)
	defer cancel()
	st, err := a.stats.get(ctx)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	now := a.cfg.Now()
	out := statsJSON{
		AsOf: st.AsOf, Total: st.Total,
		ByState:            make(map[string]int64, len(st.ByState)),
		ByTemporality:      make(map[string]int64, len(st.ByTemporality)),
		ByTopic:            st.ByTopic,
		ByPublisherService: st.ByPublisherService,
	}
	for k, v := range st.ByState {
		out.ByState[string(k)] = v
	}
	for k, v := range st.ByTemporality {
		out.ByTemporality[string(k)] = v
	}
	oldest := func(t *time.Time) *oldestJSON {
		if t == nil {
			return nil
		}
		return &oldestJSON{CreatedAt: *t, AgeSeconds: max(0, now.Sub(*t).Seconds())}
	}
	out.OldestPending, out.OldestPermanent = oldest(st.OldestPending), oldest(st.OldestPermanent)
	writeJSON(w, http.StatusOK, out)
}

// staleFactor is how many times StatsMaxAge old counts may be and still be served while a
// refresh runs; older ones make the request wait for the refresh.
const staleFactor = 3

// statsCache keeps the latest counts: the counting query scans an index of every failure, so
// it runs at most once per maxAge (per process), in the background when counts not too old
// can be served meanwhile, and concurrent requests share one run.
type statsCache struct {
	load    func(context.Context) (*store.Stats, error)
	maxAge  time.Duration
	timeout time.Duration
	now     func() time.Time
	log     *slog.Logger

	mu      sync.Mutex
	cur     *store.Stats
	err     error         // of the last refresh, when it failed
	running chan struct{} // closed when the refresh in progress ends; nil when none runs
}

func newStatsCache(load func(context.Context) (*store.Stats, error), maxAge, timeout time.Duration, now func() time.Time, log *slog.Logger) *statsCache {
	return &statsCache{load: load, maxAge: maxAge, timeout: timeout, now: now, log: log}
}

// get returns counts at most maxAge old, or at most staleFactor·maxAge old while a refresh
// runs, else waits for the refresh.
func (c *statsCache) get(ctx context.Context) (*store.Stats, error) {
	c.mu.Lock()
	age := time.Duration(-1)
	if c.cur != nil {
		age = c.now().Sub(c.cur.AsOf)
	}
	if age >= 0 && age < c.maxAge {
		st := c.cur
		c.mu.Unlock()
		return st, nil
	}
	if c.running == nil {
		c.running = make(chan struct{})
		go c.refresh(c.running)
	}
	done := c.running
	if age >= 0 && age < staleFactor*c.maxAge {
		st := c.cur
		c.mu.Unlock()
		return st, nil
	}
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	return c.cur, nil
}

// refresh counts anew, independently of any request, bounded by the query timeout.
func (c *statsCache) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.load(ctx)
	c.mu.Lock()
	if err != nil {
		c.log.Error("api: counting failures for stats failed", "error", err)
		c.err = err
	} else {
		c.cur, c.err = st, nil
	}
	c.running = nil
	c.mu.Unlock()
	close(done)
}
