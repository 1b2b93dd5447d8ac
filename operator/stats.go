package operator

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redrive/redrive"
)

// Stats returns the counts of every failure by state, temporality, topic and publisher
// service, and the oldest open ones. They come from a cache refreshed at most every
// Config.StatsMaxAge (the counting query reads an index of every failure); AsOf says when
// they were taken.
func (c *Core) Stats(ctx context.Context) (*redrive.Stats, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	return c.stats.get(ctx)
}

// Overview is what the overview page shows: the cached counts, the open failures by
// temporality with the topics and services that have most, and failures over time.
type Overview struct {
	*redrive.Stats
	// Open counts the open failures (RETRY_PENDING or PERMANENT) by temporality, topic and
	// publisher service.
	Open *redrive.OpenBreakdown
	// TopTopics and TopServices rank topics and publisher services by open failures.
	TopTopics   []NameCount
	TopServices []NameCount
	// OldestOpen is when the oldest open failure was stored; nil when none is open.
	OldestOpen *time.Time
	// Buckets count the failures stored per bucket of the asked width from since, oldest
	// first, empty ones included.
	Buckets []redrive.TimeBucket
}

// NameCount is a name with a count.
type NameCount struct {
	Name  string
	Count int64
}

// OverviewRequest asks for an overview with n time buckets of width from since.
type OverviewRequest struct {
	Since   time.Time
	Width   time.Duration
	Buckets int
	// Top is the length of the top lists. Defaults to 5.
	Top int
}

// Overview returns the overview figures.
func (c *Core) Overview(ctx context.Context, req OverviewRequest) (*Overview, error) {
	if req.Top == 0 {
		req.Top = 5
	}
	st, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	open, err := c.store.OpenFailures(ctx)
	if err != nil {
		return nil, err
	}
	got, err := c.store.FailuresOverTime(ctx, req.Since, req.Width)
	if err != nil {
		return nil, err
	}
	o := &Overview{Stats: st, Open: open, TopTopics: top(open.ByTopic, req.Top), TopServices: top(open.ByPublisherService, req.Top)}
	for _, t := range []*time.Time{st.OldestPending, st.OldestPermanent} {
		if t != nil && (o.OldestOpen == nil || t.Before(*o.OldestOpen)) {
			o.OldestOpen = t
		}
	}
	o.Buckets = make([]redrive.TimeBucket, req.Buckets)
	for i := range o.Buckets {
		o.Buckets[i].Start = req.Since.Add(time.Duration(i) * req.Width)
	}
	for _, b := range got {
		i := int(b.Start.Sub(req.Since) / req.Width)
		if b.Start.Before(req.Since) || i >= req.Buckets {
			continue
		}
		o.Buckets[i].Count += b.Count
	}
	return o, nil
}

// top returns the n names with the highest counts, ties by name.
func top(counts map[string]int64, n int) []NameCount {
	out := make([]NameCount, 0, len(counts))
	for name, c := range counts {
		if c > 0 {
			out = append(out, NameCount{Name: name, Count: c})
		}
	}
	slices.SortFunc(out, func(a, b NameCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out[:min(n, len(out))]
}

// staleFactor is how many times StatsMaxAge old counts may be and still be served while a
// refresh runs; older ones make the request wait for the refresh.
const staleFactor = 3

// statsCache keeps the latest counts: the counting query scans an index of every failure, so
// it runs at most once per maxAge (per process), in the background when counts not too old
// can be served meanwhile, and concurrent requests share one run.
type statsCache struct {
	load    func(context.Context) (*redrive.Stats, error)
	maxAge  time.Duration
	timeout time.Duration
	now     func() time.Time
	log     *slog.Logger

	mu      sync.Mutex
	cur     *redrive.Stats
	err     error         // of the last refresh, when it failed
	running chan struct{} // closed when the refresh in progress ends; nil when none runs
}

func newStatsCache(load func(context.Context) (*redrive.Stats, error), maxAge, timeout time.Duration, now func() time.Time, log *slog.Logger) *statsCache {
	return &statsCache{load: load, maxAge: maxAge, timeout: timeout, now: now, log: log}
}

// get returns counts at most maxAge old, or at most staleFactor·maxAge old while a refresh
// runs, else waits for the refresh.
func (c *statsCache) get(ctx context.Context) (*redrive.Stats, error) {
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
		c.log.Error("operator: counting failures for stats failed", "error", err)
		c.err = err
	} else {
		c.cur, c.err = st, nil
	}
	c.running = nil
	c.mu.Unlock()
	close(done)
}
