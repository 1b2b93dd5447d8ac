// Package notify tells people about failures without a dashboard: outgoing webhooks (JSON
// signed with HMAC-SHA256, or a Slack-compatible message) when a new kind of failure (a group)
// appears, when a group passes a number of failures within a window, when a failure becomes
// PERMANENT with its retries exhausted, and when a replay job finishes.
//
// It runs beside the intake, never in its way: detectors on every instance read the store for
// new events and write one outbox row per webhook and event (Postgres; a unique key makes each
// notification exist once however many instances detect it), and deliverers claim due rows
// with SKIP LOCKED, post them, and retry failed deliveries with capped exponential backoff
// until MaxAttempts. Every attempt is logged for the admins (store.ListNotifications).
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/store"
)

// Event types.
const (
	EventGroupNew         = "group.new"
	EventGroupThreshold   = "group.threshold"
	EventFailureExhausted = "failure.exhausted"
	EventJobFinished      = "job.finished"
)

// EventTypes lists every event type.
var EventTypes = []string{EventGroupNew, EventGroupThreshold, EventFailureExhausted, EventJobFinished}

// Formats of a webhook's body.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
)

// Webhook is one receiver of notifications.
type Webhook struct {
	// Name identifies the webhook in the outbox and the delivery log. Required, unique.
	Name string
	// URL receives a POST per notification. Required: http or https.
	URL string
	// Secret signs each body: X-Redrive-Signature: sha256=HEX(HMAC-SHA256(secret,
	// timestamp + "." + body)), with X-Redrive-Timestamp (Unix seconds). Empty: unsigned.
	Secret string
	// Events are the event types it gets; empty means all.
	Events []string
	// Format is FormatJSON (default) or FormatSlack ({"text": "…"}).
	Format string
}

func (w *Webhook) wants(event string) bool {
	return len(w.Events) == 0 || slices.Contains(w.Events, event)
}

// Config configures a Notifier. A zero field means the documented default.
type Config struct {
	// Store is the failure store. Required.
	Store *store.Store
	// Webhooks receive the notifications. With none, Run returns at once.
	Webhooks []Webhook
	// Threshold and Window: a group with at least Threshold failures stored within Window is
	// notified (once per window). Default 100 within 10m; a negative Threshold disables it.
	Threshold int
	Window    time.Duration
	// BaseURL is the UI's address, for links in the notifications (e.g.
	// https://redrive.example). Optional.
	BaseURL string
	// Interval is the time between two rounds of detection and delivery. Defaults to 5s.
	Interval time.Duration
	// MaxAttempts bounds the delivery attempts of one notification. Defaults to 8.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the retries: base × 2^(attempt-1), capped, with jitter.
	// Default 5s and 10m.
	BackoffBase, BackoffMax time.Duration
	// Timeout bounds one delivery. Defaults to 10s.
	Timeout time.Duration
	// HTTPClient posts the notifications. Defaults to a client with Timeout.
	HTTPClient *http.Client
	// Logger receives what happens. Defaults to a logger that discards.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// overlap is how far before its watermark a detector looks again, for events committed late
// (a group's first_seen is taken before its transaction commits).
const overlap = 5 * time.Minute

// Notifier detects events and delivers notifications.
type Notifier struct {
	cfg   Config
	hooks map[string]*Webhook
}

// New returns a Notifier for cfg, or an error starting with "invalid config".
func New(cfg Config) (*Notifier, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid config: "+format, args...)) }
	if cfg.Store == nil {
		bad("Store is required")
	}
	hooks := map[string]*Webhook{}
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		u, err := url.Parse(w.URL)
		switch {
		case w.Name == "":
			bad("webhook %d has no name", i+1)
		case hooks[w.Name] != nil:
			bad("webhook %q is defined twice", w.Name)
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			bad("webhook %q: URL %q is not an http(s) URL", w.Name, w.URL)
		}
		for _, e := range w.Events {
			if !slices.Contains(EventTypes, e) {
				bad("webhook %q: unknown event %q (want %s)", w.Name, e, strings.Join(EventTypes, ", "))
			}
		}
		switch w.Format {
		case "":
			w.Format = FormatJSON
		case FormatJSON, FormatSlack:
		default:
			bad("webhook %q: format %q is not json or slack", w.Name, w.Format)
		}
		hooks[w.Name] = w
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = 100
	}
	if cfg.Window == 0 {
		cfg.Window = 10 * time.Minute
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = 5 * time.Second
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 10 * time.Minute
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Notifier{cfg: cfg, hooks: hooks}, nil
}

// Run detects and delivers every Interval until ctx ends. Errors are logged and the next round
// tries again: a store outage or a failing receiver never stops it, nor anything else.
func (n *Notifier) Run(ctx context.Context) error {
	if len(n.hooks) == 0 {
		return nil
	}
	t := time.NewTicker(n.cfg.Interval)
	defer t.Stop()
	for {
		if err := n.Round(ctx); err != nil && ctx.Err() == nil {
			n.cfg.Logger.Error("notify: round failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round runs one detection and one delivery pass.
func (n *Notifier) Round(ctx context.Context) error {
	return errors.Join(n.Detect(ctx), n.Deliver(ctx))
}

// Detect finds new events and stores their notifications.
func (n *Notifier) Detect(ctx context.Context) error {
	var errs []error
	for _, d := range []struct {
		event string
		run   func(context.Context, time.Time) ([]event, time.Time, error)
	}{
		{EventGroupNew, n.newGroups},
		{EventGroupThreshold, n.busyGroups},
		{EventFailureExhausted, n.exhausted},
		{EventJobFinished, n.finishedJobs},
	} {
		if !n.anyWants(d.event) || (d.event == EventGroupThreshold && n.cfg.Threshold < 0) {
			continue
		}
		if err := n.detect(ctx, d.event, d.run); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.event, err))
		}
	}
	return errors.Join(errs...)
}

func (n *Notifier) anyWants(event string) bool {
	for _, w := range n.hooks {
		if w.wants(event) {
			return true
		}
	}
	return false
}

// event is one detected event.
type event struct {
	key     string // the dedupe key
	at      time.Time
	summary string // one line for people (Slack)
	data    map[string]any
}

// detect runs one detector from its watermark (the first run starts now: no history flood).
func (n *Notifier) detect(ctx context.Context, name string, run func(context.Context, time.Time) ([]event, time.Time, error)) error {
	now := n.cfg.Now()
	wm, ok, err := n.cfg.Store.NotifyWatermark(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		// The next round looks back overlap from the watermark: start it ahead, so that it
		// begins now.
		return n.cfg.Store.AdvanceNotifyWatermark(ctx, name, now.Add(overlap))
	}
	events, upTo, err := run(ctx, wm.Add(-overlap))
	if err != nil {
		return err
	}
	var ns []store.Notification
	for _, e := range events {
		for _, w := range n.hooks {
			if !w.wants(name) {
				continue
			}
			payload := map[string]any{"event": name, "at": e.at.UTC().Format(time.RFC3339Nano), "summary": e.summary, "data": e.data}
			ns = append(ns, store.Notification{Webhook: w.Name, EventType: name, DedupeKey: e.key, Payload: payload, CreatedAt: now})
		}
	}
	if _, err := n.cfg.Store.EnqueueNotifications(ctx, ns); err != nil {
		return err
	}
	if upTo.After(wm) {
		return n.cfg.Store.AdvanceNotifyWatermark(ctx, name, upTo)
	}
	return nil
}

// detectLimit bounds the events one detector reads per round; the rest come next round.
const detectLimit = 1000

func (n *Notifier) link(path string) string {
	if n.cfg.BaseURL == "" {
		return ""
	}
	return n.cfg.BaseURL + path
}

func (n *Notifier) newGroups(ctx context.Context, since time.Time) ([]event, time.Time, error) {
	groups, err := n.cfg.Store.GroupsFirstSeenSince(ctx, since, detectLimit)
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []event
	upTo := since
	for _, g := range groups {
		upTo = g.FirstSeen
		out = append(out, event{key: "group.new:" + strconv.FormatInt(g.ID, 10), at: g.FirstSeen,
			summary: fmt.Sprintf("New kind of failure: %s in %s (%s)", g.ErrorCode, g.PublisherService, orDash(g.MessageType)),
			data:    groupData(&g, n.link(fmt.Sprintf("/failures?group_id=%d", g.ID)))})
	}
	return out, upTo, nil
}

func (n *Notifier) busyGroups(ctx context.Context, _ time.Time) ([]event, time.Time, error) {
	now := n.cfg.Now()
	groups, err := n.cfg.Store.BusyGroups(ctx, now.Add(-n.cfg.Window), n.cfg.Threshold)
	if err != nil {
		return nil, time.Time{}, err
	}
	bucket := now.UnixNano() / int64(n.cfg.Window)
	var out []event
	for _, g := range groups {
		d := groupData(&g, n.link(fmt.Sprintf("/failures?group_id=%d", g.ID)))
		d["count"], d["window"], d["threshold"] = g.TotalCount, n.cfg.Window.String(), n.cfg.Threshold
		out = append(out, event{key: fmt.Sprintf("group.threshold:%d:%d", g.ID, bucket), at: now,
			summary: fmt.Sprintf("%d failures of %s in %s within %s", g.TotalCount, g.ErrorCode, g.PublisherService, n.cfg.Window), data: d})
	}
	return out, now, nil
}

func (n *Notifier) exhausted(ctx context.Context, since time.Time) ([]event, time.Time, error) {
	fs, err := n.cfg.Store.ExhaustedSince(ctx, since, detectLimit)
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []event
	upTo := since
	for _, f := range fs {
		upTo = f.UpdatedAt
		out = append(out, event{key: "failure.exhausted:" + f.ID.String(), at: f.UpdatedAt,
			summary: fmt.Sprintf("Retries exhausted: %s on %s (%s), now PERMANENT", f.ErrorCode, f.Topic, f.PublisherService),
			data: map[string]any{"failure_id": f.ID.String(), "topic": f.Topic, "error_code": f.ErrorCode,
				"publisher_service": f.PublisherService, "group_id": f.GroupID, "attempt": f.Attempt,
				"link": n.link("/failures/" + f.ID.String())}})
	}
	return out, upTo, nil
}

func (n *Notifier) finishedJobs(ctx context.Context, since time.Time) ([]event, time.Time, error) {
	jobs, err := n.cfg.Store.JobsFinishedSince(ctx, since, detectLimit)
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []event
	upTo := since
	for _, j := range jobs {
		at := *j.FinishedAt
		upTo = at
		out = append(out, event{key: "job.finished:" + j.ID.String(), at: at,
			summary: fmt.Sprintf("Job %s (%s) %s: %d done, %d skipped, %d failed of %d", j.ID, j.Action, strings.ToLower(string(j.State)), j.Done, j.Skipped, j.Failed, j.Total),
			data: map[string]any{"job_id": j.ID.String(), "action": j.Action, "state": string(j.State), "total": j.Total,
				"done": j.Done, "skipped": j.Skipped, "failed": j.Failed, "principal": j.Principal, "link": n.link("/jobs/" + j.ID.String())}})
	}
	return out, upTo, nil
}

func groupData(g *store.Group, link string) map[string]any {
	return map[string]any{"group_id": g.ID, "publisher_service": g.PublisherService, "message_type": g.MessageType,
		"error_code": g.ErrorCode, "stack_trace_hash": g.StackTraceHash, "first_seen": g.FirstSeen.UTC().Format(time.RFC3339Nano),
		"link": link}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// deliverBatch bounds the notifications one Deliver claims.
const deliverBatch = 50

// Deliver posts the due notifications, recording each attempt.
func (n *Notifier) Deliver(ctx context.Context) error {
	now := n.cfg.Now()
	due, err := n.cfg.Store.ClaimNotifications(ctx, now, now.Add(2*n.cfg.Timeout+time.Minute), deliverBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, note := range due {
		if err := n.deliver(ctx, note); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deliver makes one attempt at a notification and records it.
func (n *Notifier) deliver(ctx context.Context, note store.Notification) error {
	w := n.hooks[note.Webhook]
	attempt := store.NotifyAttempt{Attempt: note.Attempts + 1, At: n.cfg.Now()}
	var outcome store.NotifyOutcome
	if w == nil {
		attempt.Error = "no webhook of this name is configured any more"
		outcome.GiveUp = true
	} else {
		start := time.Now()
		attempt.Status, attempt.Error = n.post(ctx, w, note)
		attempt.Duration = time.Since(start)
		switch {
		case attempt.Error == "":
			outcome.Delivered = true
		case attempt.Attempt >= n.cfg.MaxAttempts:
			outcome.GiveUp = true
		default:
			outcome.NextAttemptAt = attempt.At.Add(n.backoff(attempt.Attempt))
		}
	}
	outcome.Attempt = attempt
	if !outcome.Delivered {
		n.cfg.Logger.Warn("notify: delivery failed", "webhook", note.Webhook, "event", note.EventType, "attempt", attempt.Attempt,
			"error", attempt.Error, "gave_up", outcome.GiveUp)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return n.cfg.Store.RecordNotifyAttempt(rctx, note.ID, outcome)
}

// backoff returns the wait after the given failed attempt: base × 2^(attempt-1), capped, with
// up to 20 % jitter.
func (n *Notifier) backoff(attempt int) time.Duration {
	d := n.cfg.BackoffBase << min(attempt-1, 30)
	if d <= 0 || d > n.cfg.BackoffMax {
		d = n.cfg.BackoffMax
	}
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// post sends one notification; it returns the status and, when it is not a 2xx, why.
func (n *Notifier) post(ctx context.Context, w *Webhook, note store.Notification) (int, string) {
	body, err := Body(w.Format, note.Payload)
	if err != nil {
		return 0, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	ts := strconv.FormatInt(n.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "redrive-notify")
	req.Header.Set("X-Redrive-Event", note.EventType)
	req.Header.Set("X-Redrive-Delivery", strconv.FormatInt(note.ID, 10))
	req.Header.Set("X-Redrive-Timestamp", ts)
	if w.Secret != "" {
		req.Header.Set("X-Redrive-Signature", Sign(w.Secret, ts, body))
	}
	resp, err := n.cfg.HTTPClient.Do(req)
	if err != nil {
		// The error may hold the URL; its query could hold a secret: keep the host only.
		return 0, "request to " + hostOf(w.URL) + " failed: " + errorKind(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, "the receiver answered " + resp.Status
	}
	return resp.StatusCode, ""
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return "the webhook"
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "no such host"):
		return "no such host"
	}
	return "network error"
}

// Sign returns the signature header value of a body sent at the Unix timestamp ts:
// "sha256=" and the hex HMAC-SHA256 of ts + "." + body under secret. A receiver recomputes it
// and compares in constant time (hmac.Equal), and refuses old timestamps.
func Sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Body returns the body of a notification in format: the payload as JSON, or a Slack message
// {"text": summary and link}.
func Body(format string, payload map[string]any) ([]byte, error) {
	if format != FormatSlack {
		return json.Marshal(payload)
	}
	text, _ := payload["summary"].(string)
	if data, ok := payload["data"].(map[string]any); ok {
		if link, ok := data["link"].(string); ok && link != "" {
			text += " <" + link + ">"
		}
	}
	return json.Marshal(map[string]string{"text": text})
}
