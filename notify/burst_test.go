package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/store"
)

// tally is a receiver that counts what it gets: per delivery id, and per subject (group id,
// failure id).
type tally struct {
	srv        *httptest.Server
	mu         sync.Mutex
	deliveries map[string]int
	subjects   map[string]int
	posts      int
}

func newTally(t *testing.T) *tally {
	r := &tally{deliveries: map[string]int{}, subjects: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m struct {
			Data struct {
				GroupID   any    `json:"group_id"`
				FailureID string `json:"failure_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &m)
		subject := m.Data.FailureID
		if subject == "" {
			subject = fmt.Sprint(m.Data.GroupID)
		}
		r.mu.Lock()
		r.posts++
		r.deliveries[req.Header.Get("X-Redrive-Delivery")]++
		r.subjects[subject]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// distinct returns the number of distinct subjects and of posts.
func (r *tally) counts() (subjects, posts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subjects), r.posts
}

// instance is one service instance's notifier with its own connections, named so that a test
// can kill its sessions as a crash of its process would.
type instance struct {
	name string
	pool *pgxpool.Pool
	n    *notify.Notifier
}

func newInstance(t *testing.T, db *testkit.DB, name string, hook notify.Webhook, crash func(string) error, now func() time.Time) *instance {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	n := newNotifier(t, s, func(c *notify.Config) {
		c.Webhooks, c.Concurrency, c.Now = []notify.Webhook{hook}, 8, now
	})
	if crash != nil {
		notify.SetCrash(n, crash)
	}
	return &instance{name: name, pool: pool, n: n}
}

// kill ends the instance's database sessions the way the death of its process does: the server
// sees the connections go and rolls their transactions back; nothing of the instance cleans up.
func (in *instance) kill(t *testing.T, admin *pgxpool.Pool) {
	t.Helper()
	if _, err := admin.Exec(context.Background(),
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, in.name); err != nil {
		t.Fatal(err)
	}
}

// runUntil runs rounds of the instances, each in its own goroutine, until done holds.
func runUntil(t *testing.T, what string, done func() bool, ins ...*instance) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done before the deadline", what)
		}
		var wg sync.WaitGroup
		for _, in := range ins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = in.n.Round(context.Background())
			}()
		}
		wg.Wait()
	}
}

func insertGroups(t *testing.T, pool *pgxpool.Pool, prefix string, n int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO failure_groups (publisher_service, error_code)
		SELECT 'burst', $1 || g FROM generate_series(1, $2) g`, prefix, n); err != nil {
		t.Fatal(err)
	}
}

func waiting(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM notify_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// 10,000 new groups at once, two instances detecting and delivering together, one of them
// killed in the middle of a page: every group is notified, exactly once, and so is the next
// one after the burst, with the killed instance restarted.
func TestBurstTwoInstancesOneKilled(t *testing.T) {
	t.Parallel()
	db := testkit.PostgresDB(t)
	rcv := newTally(t)
	hook := notify.Webhook{Name: "ops", URL: rcv.srv.URL, Secret: "s", Events: []string{notify.EventGroupNew}}

	// Both run from the start, each taking pages while the other holds one: a holds its first
	// page open until b has taken one, then dies holding its second, which b waits for.
	var aPages, bPages atomic.Int32
	bTook, holding, dead := make(chan struct{}), make(chan struct{}), make(chan struct{})
	a := newInstance(t, db, "notify-a", hook, func(step string) error {
		if step == notify.StepRelayed {
			switch aPages.Add(1) {
			case 1:
				<-bTook
			case 2:
				close(holding)
				<-dead
				return errors.New("killed")
			}
		}
		return nil
	}, nil)
	b := newInstance(t, db, "notify-b", hook, func(step string) error {
		if step == notify.StepRelayed {
			switch bPages.Add(1) {
			case 1:
				close(bTook)
			case 2:
				<-holding
			}
		}
		return nil
	}, nil)
	const burst = 10000
	insertGroups(t, db.Pool, "E", burst)

	aDone := make(chan struct{})
	go func() { // a runs until it dies
		defer close(aDone)
		for {
			_ = a.n.Round(context.Background())
			select {
			case <-dead:
				return
			default:
			}
		}
	}()
	// b notifies everything but a's second page, which a's open transaction holds.
	runUntil(t, "b with a holding a page", func() bool {
		s, _ := rcv.counts()
		return s == burst-500 && waiting(t, db.Pool) == 500
	}, b)
	if aPages.Load() != 2 || bPages.Load() != burst/500-2 {
		t.Errorf("a took %d pages, b %d; want 2 and %d", aPages.Load(), bPages.Load(), burst/500-2)
	}
	// a's process dies: its sessions end with its transaction open, its goroutine still stuck
	// in the page (no rollback, no cleanup of its own). b takes the page over.
	a.kill(t, db.Pool)
	runUntil(t, "b after a's death", func() bool { s, _ := rcv.counts(); return s == burst }, b)
	close(dead)
	<-aDone

	// a restarts; both run; one more group comes.
	a2 := newInstance(t, db, "notify-a2", hook, nil, nil)
	insertGroups(t, db.Pool, "LATE", 1)
	runUntil(t, "the one after the burst", func() bool { s, _ := rcv.counts(); return s == burst+1 }, a2, b)
	for range 2 {
		runUntil(t, "idle rounds", func() bool { return true }, a2, b)
	}
	s, posts := rcv.counts()
	if s != burst+1 || posts != burst+1 || waiting(t, db.Pool) != 0 {
		t.Errorf("%d groups notified in %d posts, %d events waiting; want %d each, none waiting", s, posts, waiting(t, db.Pool), burst+1)
	}
	rcv.mu.Lock()
	for id, n := range rcv.deliveries {
		if n != 1 {
			t.Errorf("delivery %s posted %d times", id, n)
		}
	}
	rcv.mu.Unlock()
}

// 10,000 failures exhausted at once (the scheduler's UPDATE, one transaction) are all
// notified, and the next one too.
func TestBurstOfExhaustedFailures(t *testing.T) {
	t.Parallel()
	db := testkit.PostgresDB(t)
	rcv := newTally(t)
	hook := notify.Webhook{Name: "ops", URL: rcv.srv.URL, Events: []string{notify.EventFailureExhausted}}
	a := newInstance(t, db, "notify-a", hook, nil, nil)
	b := newInstance(t, db, "notify-b", hook, nil, nil)
	const burst = 10000
	id := testkit.InsertFailure(t, db.Pool, testkit.FailureRow{State: redrive.StateRetryPending, ErrorCode: "TIMEOUT"})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id,
			event_created, publisher_system, publisher_service, original_topic, original_partition, original_offset, original_value,
			causing_message, next_attempt_at, group_id)
		SELECT 'RETRY_PENDING', 'TEMPORARY', 'TIMEOUT', 'm', 'ev-' || g, 'idem-' || g, now(), 'sys', 'svc', 'orders', 0, g, '\x00',
			'cause-' || g, now(), f.group_id
		FROM generate_series(1, $1) g, (SELECT group_id FROM failures WHERE id = $2) f`, burst-1, id); err != nil {
		t.Fatal(err)
	}
	exhaust := func() {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `UPDATE failures SET state = 'PERMANENT', state_reason = $1, next_attempt_at = NULL
			WHERE state = 'RETRY_PENDING'`, redrive.StateReasonRetriesExhausted); err != nil {
			t.Fatal(err)
		}
	}
	exhaust()
	runUntil(t, "the burst", func() bool { s, _ := rcv.counts(); return s == burst }, a, b)
	testkit.InsertFailure(t, db.Pool, testkit.FailureRow{State: redrive.StateRetryPending, ErrorCode: "TIMEOUT", Causing: "late"})
	exhaust()
	runUntil(t, "the one after", func() bool { s, _ := rcv.counts(); return s == burst+1 }, a, b)
	if s, posts := rcv.counts(); posts != s {
		t.Errorf("%d posts for %d failures", posts, s)
	}
}

// An instance that dies between the steps of a delivery (claimed but not posted; posted but
// not recorded) leaves its notifications to another, which posts them once its claim has
// expired: every notification arrives, a repeat carries the same delivery id, and each ends
// delivered in the log.
func TestCrashBetweenSteps(t *testing.T) {
	t.Parallel()
	for _, step := range []string{notify.StepClaimed, notify.StepPosted, notify.StepRecording} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			db := testkit.PostgresDB(t)
			rcv := newTally(t)
			hook := notify.Webhook{Name: "ops", URL: rcv.srv.URL, Events: []string{notify.EventGroupNew}}
			crashed := errors.New("crashed")
			a := newInstance(t, db, "notify-a", hook, func(s string) error {
				if s == step {
					return crashed
				}
				return nil
			}, nil)
			const n = 40
			insertGroups(t, db.Pool, "E", n)
			_ = a.n.Round(context.Background()) // detects all, then dies at step for each delivery
			posted := 0
			if step != notify.StepClaimed {
				posted = n
			}
			if s, posts := rcv.counts(); posts != posted || s != posted {
				t.Fatalf("before the restart: %d posts, want %d", posts, posted)
			}
			// b's clock is past a's claims.
			later := func() time.Time { return time.Now().Add(time.Hour) }
			b := newInstance(t, db, "notify-b", hook, nil, later)
			runUntil(t, "b", func() bool {
				var undelivered int
				if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notify_outbox WHERE delivered_at IS NULL`).Scan(&undelivered); err != nil {
					t.Fatal(err)
				}
				return undelivered == 0
			}, b)
			s, err := store.New(store.Config{Pool: db.Pool})
			if err != nil {
				t.Fatal(err)
			}
			log, err := s.ListNotifications(context.Background(), 0, 100)
			if err != nil || len(log) != n {
				t.Fatalf("log: %d, %v", len(log), err)
			}
			for _, note := range log {
				if note.DeliveredAt == nil || len(note.Log) != 1 {
					t.Errorf("notification %d: delivered at %v, %d attempts logged", note.ID, note.DeliveredAt, len(note.Log))
				}
			}
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			if len(rcv.deliveries) != n {
				t.Errorf("%d delivery ids for %d notifications", len(rcv.deliveries), n)
			}
			for id, c := range rcv.deliveries {
				if want := 1 + min(posted, 1); c != want {
					t.Errorf("delivery %s posted %d times, want %d", id, c, want)
				}
			}
		})
	}
}
