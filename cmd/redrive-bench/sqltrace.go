package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlTrace is a pgx.QueryTracer that sums, per statement, the calls and the time from sending
// it to reading its result (the database's work plus the round trip), while on.
type sqlTrace struct {
	mu    sync.Mutex
	on    bool
	stats map[string]*sqlStat
}

type sqlStat struct {
	calls int
	total time.Duration
}

type sqlTraceKey struct{}

type sqlTraceStart struct {
	sql   string
	start time.Time
}

func newSQLTrace() *sqlTrace { return &sqlTrace{stats: map[string]*sqlStat{}} }

// TraceQueryStart implements pgx.QueryTracer.
func (t *sqlTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlTraceKey{}, sqlTraceStart{sql: data.SQL, start: time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *sqlTrace) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	st, ok := ctx.Value(sqlTraceKey{}).(sqlTraceStart)
	if !ok {
		return
	}
	d := time.Since(st.start)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on {
		return
	}
	key := strings.Join(strings.Fields(st.sql), " ")
	if len(key) > 90 {
		key = key[:90]
	}
	s := t.stats[key]
	if s == nil {
		s = &sqlStat{}
		t.stats[key] = s
	}
	s.calls++
	s.total += d
}

// start clears the sums and starts summing.
func (t *sqlTrace) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on, t.stats = true, map[string]*sqlStat{}
}

// resume starts summing again, keeping the sums.
func (t *sqlTrace) resume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = true
}

// stop stops summing.
func (t *sqlTrace) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = false
}

// report prints the statements by total time, per item of n.
func (t *sqlTrace) report(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.stats))
	var total time.Duration
	for k, s := range t.stats {
		keys = append(keys, k)
		total += s.total
	}
	sort.Slice(keys, func(i, j int) bool { return t.stats[keys[i]].total > t.stats[keys[j]].total })
	fmt.Printf("statements while measured (time from send to result, summed over connections): %s, %.1f µs per item\n",
		total.Round(time.Millisecond), float64(total.Microseconds())/float64(n))
	fmt.Printf("%8s %10s %10s  %s\n", "calls", "total ms", "µs/item", "statement")
	for _, k := range keys {
		s := t.stats[k]
		fmt.Printf("%8d %10.1f %10.2f  %s\n", s.calls, float64(s.total.Microseconds())/1000, float64(s.total.Microseconds())/float64(n), k)
	}
}
