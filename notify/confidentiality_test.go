package notify_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/store"
)

// No webhook body, JSON or Slack, carries payload bytes: failures whose key, value and header
// values hold a secret, one of them exhausted, in a busy group, and a finished job whose
// selection names the secret, notify every event without it.
func TestNotificationsCarryNoPayload(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-0c4a-77e1-9b2f"
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		bodies []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	n, err := notify.New(notify.Config{Store: s, Threshold: 2, Window: time.Hour, BaseURL: "https://redrive.example",
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond,
		Webhooks: []notify.Webhook{{Name: "json", URL: srv.URL}, {Name: "chat", URL: srv.URL, Format: notify.FormatSlack}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.Round(ctx); err != nil { // sets the watermarks
		t.Fatal(err)
	}
	row := testkit.FailureRow{State: redrive.StateRetryPending, ErrorCode: "SECRET_TEST", Key: []byte(secret),
		Value: []byte(`{"ssn":"` + secret + `"}`), HeaderNames: []string{"x-secret"}, HeaderValues: [][]byte{[]byte(secret)}}
	id := testkit.InsertFailure(t, pool, row)
	testkit.InsertFailure(t, pool, row)
	if _, err := pool.Exec(ctx, "UPDATE failures SET state = 'PERMANENT', state_reason = $2, updated_at = now() WHERE id = $1", id, redrive.StateReasonRetriesExhausted); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (action, state, principal, selection, rate_limit, token_hash, total, done,
		created_at, preview_expires_at, started_at, finished_at, updated_at)
		VALUES ('close', 'DONE', 'alice', $1, 10, '\x00', 1, 1, now(), now(), now(), now(), now())`,
		map[string]any{"filter": map[string]any{"key": secret}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := n.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	events := map[string]bool{}
	for _, b := range bodies {
		for _, e := range []string{notify.EventGroupNew, notify.EventGroupThreshold, notify.EventFailureExhausted, notify.EventJobFinished} {
			if strings.Contains(b, `"event":"`+e+`"`) {
				events[e] = true
			}
		}
		if strings.Contains(b, secret) || strings.Contains(b, base64.StdEncoding.EncodeToString([]byte(secret))) {
			t.Errorf("a webhook body carries the secret: %s", b)
		}
	}
	if len(events) != 4 {
		t.Errorf("events notified = %v, want all four (bodies %q)", events, bodies)
	}
}
