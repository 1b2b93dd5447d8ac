package notify_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/store"
)

// receiver is a webhook endpoint that fails the first failFirst requests, then accepts.
type receiver struct {
	srv       *httptest.Server
	failFirst int32
	calls     atomic.Int32
	mu        sync.Mutex
	accepted  []map[string]any
	headers   []http.Header
	bodies    [][]byte
}

func newReceiver(t *testing.T, failFirst int32) *receiver {
	r := &receiver{failFirst: failFirst}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if r.calls.Add(1) <= r.failFirst {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		r.mu.Lock()
		r.accepted, r.headers, r.bodies = append(r.accepted, m), append(r.headers, req.Header.Clone()), append(r.bodies, body)
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func newNotifier(t *testing.T, s *store.Store, mod func(*notify.Config)) *notify.Notifier {
	t.Helper()
	cfg := notify.Config{Store: s, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Threshold: -1}
	if mod != nil {
		mod(&cfg)
	}
	n, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// With two instances and a receiver that fails at first, each notification is delivered
// exactly once, and every attempt is logged.
func TestEachNotificationOnce(t *testing.T) {
	t.Parallel()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	rcv := newReceiver(t, 2)
	hook := notify.Webhook{Name: "ops", URL: rcv.srv.URL, Secret: "s3cret", Events: []string{notify.EventGroupNew}}
	a := newNotifier(t, s, func(c *notify.Config) { c.Webhooks = []notify.Webhook{hook}; c.BaseURL = "https://redrive.example/" })
	b := newNotifier(t, s, func(c *notify.Config) { c.Webhooks = []notify.Webhook{hook}; c.BaseURL = "https://redrive.example" })
	ctx := context.Background()
	testkit.InsertFailure(t, pool, testkit.FailureRow{ErrorCode: "NEW_KIND", PublisherService: "billing"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var wg sync.WaitGroup
		for _, n := range []*notify.Notifier{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = n.Round(ctx) // failed deliveries are errors here, and retried
			}()
		}
		wg.Wait()
		rcv.mu.Lock()
		got := len(rcv.accepted)
		rcv.mu.Unlock()
		if got >= 1 && time.Now().After(deadline.Add(-29*time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// More rounds change nothing.
	for range 3 {
		_ = a.Round(ctx)
		_ = b.Round(ctx)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.accepted) != 1 {
		t.Fatalf("%d deliveries, want 1: %v", len(rcv.accepted), rcv.accepted)
	}
	m := rcv.accepted[0]
	data, _ := m["data"].(map[string]any)
	if m["event"] != notify.EventGroupNew || data["error_code"] != "NEW_KIND" || !strings.HasPrefix(data["link"].(string), "https://redrive.example/failures?group_id=") {
		t.Errorf("notification = %v", m)
	}
	h := rcv.headers[0]
	if want := notify.Sign("s3cret", h.Get("X-Redrive-Timestamp"), rcv.bodies[0]); !hmac.Equal([]byte(h.Get("X-Redrive-Signature")), []byte(want)) {
		t.Errorf("signature %q, want %q", h.Get("X-Redrive-Signature"), want)
	}
	log, err := s.ListNotifications(ctx, 0, 10)
	if err != nil || len(log) != 1 || log[0].DeliveredAt == nil || len(log[0].Log) != 3 || log[0].Log[0].Status != 503 || log[0].Log[2].Status != 200 {
		t.Errorf("delivery log = %+v, %v", log, err)
	}
}

// The other events: a busy group, retries exhausted, a finished job; a Slack-format body.
func TestEvents(t *testing.T) {
	t.Parallel()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	rcv := newReceiver(t, 0)
	slack := newReceiver(t, 0)
	n := newNotifier(t, s, func(c *notify.Config) {
		c.Threshold, c.Window = 3, time.Hour
		c.Webhooks = []notify.Webhook{{Name: "all", URL: rcv.srv.URL}, {Name: "chat", URL: slack.srv.URL, Format: notify.FormatSlack, Events: []string{notify.EventFailureExhausted}}}
	})
	ctx := context.Background()
	if err := n.Round(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		testkit.InsertFailure(t, pool, testkit.FailureRow{ErrorCode: "BURST"})
	}
	id := testkit.InsertFailure(t, pool, testkit.FailureRow{State: redrive.StateRetryPending, ErrorCode: "TIMEOUT"})
	if _, err := pool.Exec(ctx, "UPDATE failures SET state = 'PERMANENT', state_reason = $2, updated_at = now() WHERE id = $1", id, redrive.StateReasonRetriesExhausted); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (action, state, principal, selection, rate_limit, token_hash, total, done,
		created_at, preview_expires_at, started_at, finished_at, updated_at)
		VALUES ('close', 'DONE', 'alice', '{}', 10, '\x00', 1, 1, now(), now(), now(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := n.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	events := map[string]int{}
	rcv.mu.Lock()
	for _, m := range rcv.accepted {
		events[m["event"].(string)]++
	}
	rcv.mu.Unlock()
	if events[notify.EventGroupThreshold] != 1 || events[notify.EventFailureExhausted] != 1 || events[notify.EventJobFinished] != 1 || events[notify.EventGroupNew] != 2 {
		t.Errorf("events = %v", events)
	}
	slack.mu.Lock()
	defer slack.mu.Unlock()
	if len(slack.bodies) != 1 || !strings.HasPrefix(string(slack.bodies[0]), `{"text":"Retries exhausted: TIMEOUT`) {
		t.Errorf("slack bodies = %q", slack.bodies)
	}
}

// An unreachable webhook is retried, then given up, and logged; nothing else waits for it.
func TestUnreachableWebhook(t *testing.T) {
	t.Parallel()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/hook?token=secret-in-query"
	dead.Close()
	n := newNotifier(t, s, func(c *notify.Config) {
		c.MaxAttempts = 3
		c.Webhooks = []notify.Webhook{{Name: "gone", URL: url}}
	})
	ctx := context.Background()
	_ = n.Round(ctx)
	testkit.InsertFailure(t, pool, testkit.FailureRow{ErrorCode: "X"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		_ = n.Round(ctx)
		log, err := s.ListNotifications(ctx, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) == 1 && log[0].GaveUpAt != nil {
			if len(log[0].Log) != 3 || strings.Contains(*log[0].LastError, "secret-in-query") || !strings.Contains(*log[0].LastError, "connection refused") {
				t.Errorf("log = %+v, last error %q", log[0].Log, *log[0].LastError)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never gave up: %+v", log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	s := &store.Store{}
	for name, hooks := range map[string][]notify.Webhook{
		"no name":       {{URL: "http://x"}},
		"bad url":       {{Name: "a", URL: "ftp://x"}},
		"twice":         {{Name: "a", URL: "http://x"}, {Name: "a", URL: "http://y"}},
		"unknown event": {{Name: "a", URL: "http://x", Events: []string{"group.gone"}}},
		"bad format":    {{Name: "a", URL: "http://x", Format: "xml"}},
	} {
		if _, err := notify.New(notify.Config{Store: s, Webhooks: hooks}); err == nil || !strings.Contains(err.Error(), "invalid config") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseWebhooks(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OPS_SECRET": "abc"}
	getenv := func(k string) string { return env[k] }
	readFile := func(p string) ([]byte, error) {
		if p == "/run/secret" {
			return []byte("from-file\n"), nil
		}
		return nil, io.ErrUnexpectedEOF
	}
	hooks, err := notify.ParseWebhooks(strings.NewReader(`
# webhooks
ops  https://hooks.example/r  events=group.new,failure.exhausted secret=env:OPS_SECRET
chat https://chat.example/x   format=slack secret=file:/run/secret
`), "hooks.conf", getenv, readFile)
	if err != nil || len(hooks) != 2 || hooks[0].Secret != "abc" || len(hooks[0].Events) != 2 || hooks[1].Format != "slack" || hooks[1].Secret != "from-file" {
		t.Fatalf("hooks = %+v, %v", hooks, err)
	}
	for text, line := range map[string]string{
		"ops":                               "line 1",
		"ops https://x secret=plain-secret": "line 1",
		"ops https://x secret=env:NOPE":     "line 1",
		"\nops https://x colour=blue":       "line 2",
		"ops https://x events":              "line 1",
	} {
		_, err := notify.ParseWebhooks(strings.NewReader(text), "hooks.conf", getenv, readFile)
		if err == nil || !strings.Contains(err.Error(), "hooks.conf "+line) || strings.Contains(err.Error(), "plain-secret") {
			t.Errorf("%q: %v", text, err)
		}
	}
}
