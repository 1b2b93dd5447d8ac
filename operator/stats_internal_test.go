package operator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"
)

// The stats cache serves fresh counts from memory, stale ones while one refresh runs in the
// background, and makes requests wait only when the counts are too old.
func TestStatsCache(t *testing.T) {
	var (
		mu      sync.Mutex
		now     = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		loads   atomic.Int64
		release = make(chan struct{}, 10)
		fail    atomic.Bool
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	load := func(ctx context.Context) (*redrive.Stats, error) {
		<-release
		n := loads.Add(1)
		if fail.Load() {
			return nil, errors.New("db down")
		}
		return &redrive.Stats{Total: n, AsOf: clock()}, nil
	}
	c := newStatsCache(load, time.Second, time.Minute, clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	// No counts yet: concurrent requests wait for one shared load.
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := c.get(ctx); err != nil || st.Total != 1 {
				t.Errorf("first get = %+v, %v", st, err)
			}
		}()
	}
	release <- struct{}{}
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("%d loads for concurrent first requests, want 1", loads.Load())
	}
	// Fresh: served from memory.
	advance(500 * time.Millisecond)
	if st, _ := c.get(ctx); st.Total != 1 || loads.Load() != 1 {
		t.Errorf("fresh get = %+v after %d loads", st, loads.Load())
	}
	// Stale but not too old: served at once while a refresh runs.
	advance(time.Second)
	if st, err := c.get(ctx); err != nil || st.Total != 1 {
		t.Errorf("stale get = %+v, %v", st, err)
	}
	release <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := c.get(ctx)
		if st.Total == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background refresh never landed")
		}
		time.Sleep(time.Millisecond)
	}
	// Too old: the request waits, and a failed refresh is an error.
	advance(10 * time.Second)
	fail.Store(true)
	release <- struct{}{}
	if _, err := c.get(ctx); err == nil {
		t.Error("get after a failed refresh of too old counts succeeded")
	}
	// A request whose context ends stops waiting.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.get(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("get with a canceled context = %v", err)
	}
	release <- struct{}{}
}
