// Package notify tells people about failures without a dashboard: outgoing webhooks (JSON
// signed with HMAC-SHA256, or a Slack-compatible message) when a new kind of failure (a group)
// appears, when a group passes a number of failures within a window, when a failure becomes
// PERMANENT with its retries exhausted, and when a replay job finishes.
//
// It runs beside the intake, never in its way, and never stalls. Triggers write each event
// into an events outbox (notify_events) in the transaction of the change itself; every
// instance takes pages of events with SKIP LOCKED and, in one transaction, turns each page into
// one outbox row per webhook and event (notify_outbox; a unique key makes each notification
// exist once) and deletes it. Nothing is read by time, so however many events arrive at once
// all are notified, and an instance that dies mid-page leaves its page to the others.
// Deliverers claim due rows with SKIP LOCKED, post them, and retry failed deliveries with
// capped exponential backoff until MaxAttempts. Delivery is at least once: a delivery whose
// outcome was not recorded (the instance died after posting) is posted again, with the same
// X-Redrive-Delivery id. Every attempt is logged for the admins (store.ListNotifications).
//
// Deliveries never follow redirects (the signature goes to the configured URL only) and never
// connect to link-local or cloud metadata addresses unless Config.AllowLinkLocal says so.
package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/store"
)

// Event types.
const (
	EventGroupNew         = redrive.NotifyEventGroupNew
	EventGroupThreshold   = "group.threshold"
	EventFailureExhausted = redrive.NotifyEventFailureExhausted
	EventJobFinished      = redrive.NotifyEventJobFinished
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
	// Webhooks receive the notifications. With none, the notifier still takes the waiting
	// events (and drops them), so that they do not pile up.
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
	// BatchSize is the number of events one transaction turns into notifications, and of
	// notifications one deliverer claims at a time. Defaults to 500.
	BatchSize int
	// Concurrency is the number of deliveries one instance makes at once. Defaults to 4.
	Concurrency int
	// MaxAttempts bounds the delivery attempts of one notification. Defaults to 8.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the retries: base × 2^(attempt-1), capped, with jitter.
	// Default 5s and 10m.
	BackoffBase, BackoffMax time.Duration
	// Timeout bounds one delivery. Defaults to 10s.
	Timeout time.Duration
	// AllowLinkLocal lets webhooks reach link-local and cloud metadata addresses
	// (169.254.0.0/16, fe80::/10, 100.100.100.200, fd00:ec2::254, metadata.google.internal, …),
	// which New otherwise refuses in a URL and deliveries refuse when they connect. Defaults to
	// false.
	AllowLinkLocal bool
	// HTTPClient posts the notifications. Defaults to a client with Timeout that refuses
	// blocked addresses when it connects. Whatever the client, redirects are never followed.
	HTTPClient *http.Client
	// Logger receives what happens. Defaults to a logger that discards.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Notifier detects events and delivers notifications.
type Notifier struct {
	cfg   Config
	hooks map[string]*Webhook
	// crash, when set (tests), is called at each step of a batch; an error stops the batch
	// there as a crash would: nothing after it happens, nothing is cleaned up.
	crash func(step string) error
}

// Steps of a batch, for the crash hook of tests.
const (
	stepRelayed   = "relayed"   // events turned into notifications, transaction not committed
	stepClaimed   = "claimed"   // a notification claimed for delivery, not posted
	stepPosted    = "posted"    // a notification posted, its outcome not recorded
	stepRecording = "recording" // about to record an outcome
)

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
			bad("webhook %q: URL %q is not an http(s) URL", w.Name, redactURL(w.URL))
		case !cfg.AllowLinkLocal:
			if err := checkTarget(u.Hostname()); err != nil {
				bad("webhook %q: %w is refused as a target (it reaches this machine's own services and cloud credentials, not a receiver)", w.Name, err)
			}
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
	if cfg.BatchSize < 0 || cfg.Concurrency < 0 {
		bad("BatchSize and Concurrency may not be negative")
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
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 500
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 4
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
		cfg.HTTPClient = newHTTPClient(cfg.Timeout, cfg.AllowLinkLocal)
	} else {
		c := *cfg.HTTPClient
		c.CheckRedirect = noRedirects
		cfg.HTTPClient = &c
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

// redactURL keeps a URL's scheme, host and path: its query or user info could hold a secret.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// Run detects and delivers every Interval until ctx ends. Errors are logged and the next round
// tries again: a store outage or a failing receiver never stops it, nor anything else.
func (n *Notifier) Run(ctx context.Context) error {
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

func (n *Notifier) anyWants(event string) bool {
	for _, w := range n.hooks {
		if w.wants(event) {
			return true
		}
	}
	return false
}

func (n *Notifier) step(name string) error {
	if n.crash == nil {
		return nil
	}
	return n.crash(name)
}
