package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/store"
)

// Webhook targets in link-local and cloud metadata ranges are refused at start, unless
// allowed; other addresses, private ones included, are accepted.
func TestBlockedTargets(t *testing.T) {
	t.Parallel()
	s := &store.Store{}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://169.254.170.2/v2/credentials", "http://[fe80::1]/",
		"http://[fe80::1%25eth0]:8080/", "http://100.100.100.200/", "http://[fd00:ec2::254]/", "http://metadata.google.internal/computeMetadata/v1/",
		"http://METADATA.google.internal./", "http://[::ffff:169.254.169.254]/", "http://0.0.0.0:8080/", "https://instance-data/"} {
		hooks := []notify.Webhook{{Name: "x", URL: u}}
		_, err := notify.New(notify.Config{Store: s, Webhooks: hooks})
		if !errors.Is(err, notify.ErrBlockedTarget) || !strings.Contains(err.Error(), "invalid config") {
			t.Errorf("%s: %v, want ErrBlockedTarget", u, err)
		}
		if _, err := notify.New(notify.Config{Store: s, Webhooks: hooks, AllowLinkLocal: true}); err != nil {
			t.Errorf("%s allowed: %v", u, err)
		}
	}
	for _, u := range []string{"https://hooks.slack.com/services/T/B/X", "http://10.0.0.7:8080/hook", "http://127.0.0.1:9/", "http://[2001:db8::1]/",
		"http://169.254.example/"} {
		if _, err := notify.New(notify.Config{Store: s, Webhooks: []notify.Webhook{{Name: "x", URL: u}}}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// A receiver's redirect is never followed: neither the body nor its signature reaches the
// other origin (nor the same one), and the attempt is logged as a failure that says why.
func TestRedirectsNotFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	var first atomic.Int32
	var target *httptest.Server
	target = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/same" {
			first.Add(1)
			http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
			return
		}
		if r.URL.Path == "/moved" {
			elsewhere.Add(100) // a same-origin redirect is not followed either
			return
		}
		first.Add(1)
		http.Redirect(w, r, other.URL+"/steal?x=1", http.StatusPermanentRedirect)
	}))
	defer target.Close()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	hooks := []notify.Webhook{
		{Name: "cross", URL: target.URL + "/hook", Secret: "sig-secret", Events: []string{notify.EventGroupNew}},
		{Name: "same", URL: target.URL + "/same", Secret: "sig-secret", Events: []string{notify.EventGroupNew}},
	}
	// With the default client and with one of the caller's that would follow redirects.
	for _, client := range []*http.Client{nil, {Timeout: 5 * time.Second}} {
		n := newNotifier(t, s, func(c *notify.Config) { c.Webhooks, c.HTTPClient, c.MaxAttempts = hooks, client, 1 })
		testkit.InsertFailure(t, pool, testkit.FailureRow{ErrorCode: "E" + time.Now().Format("150405.000000")})
		if err := n.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if first.Load() != 4 || elsewhere.Load() != 0 {
		t.Errorf("configured URL got %d posts (want 4), elsewhere got %d (want 0)", first.Load(), elsewhere.Load())
	}
	log, err := s.ListNotifications(context.Background(), 0, 10)
	if err != nil || len(log) != 4 {
		t.Fatalf("log: %+v, %v", log, err)
	}
	for _, note := range log {
		if note.GaveUpAt == nil || len(note.Log) != 1 || note.Log[0].Status/100 != 3 || !strings.Contains(*note.LastError, "redirect not followed") ||
			strings.Contains(*note.LastError, "steal") {
			t.Errorf("notification %d: status %v, error %v", note.ID, note.Log, *note.LastError)
		}
	}
}

// Slack text built from failure fields escapes what Slack interprets: no mention, no link, no
// entity comes from a field; the link to the UI stays a link.
func TestSlackBodyEscapes(t *testing.T) {
	t.Parallel()
	hostile := "<!channel> <@U123> <https://evil.example|click here> &amp; a>b"
	body, err := notify.Body(notify.FormatSlack, map[string]any{"summary": "New kind of failure: " + hostile,
		"data": map[string]any{"link": "https://redrive.example/failures?group_id=2&x=<y>|z"}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	want := "New kind of failure: &lt;!channel&gt; &lt;@U123&gt; &lt;https://evil.example|click here&gt; &amp;amp; a&gt;b" +
		" <https://redrive.example/failures?group_id=2&amp;x=&lt;y&gt;%7Cz>"
	if m["text"] != want {
		t.Errorf("text\n %q\nwant\n %q", m["text"], want)
	}
	if strings.Count(m["text"], "<") != 1 || strings.Count(m["text"], ">") != 1 {
		t.Errorf("text has markup besides the link: %q", m["text"])
	}
}

// End to end: a failure whose fields hold Slack markup reaches Slack as plain text.
func TestSlackHostileFailure(t *testing.T) {
	t.Parallel()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	slack := newReceiver(t, 0)
	n := newNotifier(t, s, func(c *notify.Config) {
		c.BaseURL = "https://redrive.example"
		c.Webhooks = []notify.Webhook{{Name: "chat", URL: slack.srv.URL, Format: notify.FormatSlack, Events: []string{notify.EventGroupNew}}}
	})
	testkit.InsertFailure(t, pool, testkit.FailureRow{ErrorCode: "<!here>", PublisherService: "<https://evil.example|billing>", MessageType: "A&B"})
	if err := n.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	slack.mu.Lock()
	defer slack.mu.Unlock()
	if len(slack.accepted) != 1 {
		t.Fatalf("%d posts", len(slack.accepted))
	}
	text, _ := slack.accepted[0]["text"].(string)
	want := "New kind of failure: &lt;!here&gt; in &lt;https://evil.example|billing&gt; (A&amp;B) <https://redrive.example/failures?group_id=1>"
	if text != want {
		t.Errorf("text %q, want %q", text, want)
	}
}
