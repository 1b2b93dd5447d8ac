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
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/store"
)

// claimsPerWorker is the number of notifications a deliverer claims per concurrent delivery.
const claimsPerWorker = 8

// maxDeliverBatches bounds the claims of one Deliver, so that a round also detects.
const maxDeliverBatches = 100

// Deliver posts the due notifications, Concurrency at a time, recording each attempt, until
// none is due or a bounded number of batches went out.
func (n *Notifier) Deliver(ctx context.Context) error {
	batch := claimsPerWorker * n.cfg.Concurrency
	// A claim holds its rows long enough for the whole batch to time out, plus a margin;
	// rows of an instance that died come back after it.
	hold := time.Duration(claimsPerWorker)*(n.cfg.Timeout+time.Second) + time.Minute
	var errs []error
	for range maxDeliverBatches {
		now := n.cfg.Now()
		due, err := n.cfg.Store.ClaimNotifications(ctx, now, now.Add(hold), batch)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			next = make(chan redrive.Notification)
		)
		for range min(n.cfg.Concurrency, len(due)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for note := range next {
					if err := n.deliver(ctx, note); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			}()
		}
		for _, note := range due {
			next <- note
		}
		close(next)
		wg.Wait()
		if len(due) < batch || ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// deliver makes one attempt at a notification and records it.
func (n *Notifier) deliver(ctx context.Context, note redrive.Notification) error {
	if n.step(stepClaimed) != nil {
		return nil // crashed before posting: the claim expires and another attempt comes
	}
	w := n.hooks[note.Webhook]
	attempt := redrive.NotifyAttempt{Attempt: note.Attempts + 1, At: n.cfg.Now()}
	var outcome store.NotifyOutcome
	if w == nil {
		attempt.Error = "no webhook of this name is configured any more"
		outcome.GiveUp = true
	} else {
		start := time.Now()
		attempt.Status, attempt.Error = n.post(ctx, w, note)
		attempt.Duration = time.Since(start)
		if n.step(stepPosted) != nil {
			return nil // crashed after posting: it is posted again, with the same delivery id
		}
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
		n.cfg.Logger.Warn("notify: delivery failed", "webhook", note.Webhook, "event", note.EventType, "delivery", note.ID,
			"attempt", attempt.Attempt, "error", attempt.Error, "gave_up", outcome.GiveUp)
	}
	if err := n.step(stepRecording); err != nil {
		return err
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

// DeliveryID is the X-Redrive-Delivery header of a notification: the same on every attempt,
// so that a receiver drops a repeat (delivery is at least once).
func DeliveryID(note redrive.Notification) string { return strconv.FormatInt(note.ID, 10) }

// post sends one notification; it returns the status and, when it is not a 2xx, why.
func (n *Notifier) post(ctx context.Context, w *Webhook, note redrive.Notification) (int, string) {
	body, err := Body(w.Format, note.Payload)
	if err != nil {
		return 0, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "the webhook's URL does not make a request"
	}
	ts := strconv.FormatInt(n.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "redrive-notify")
	req.Header.Set("X-Redrive-Event", note.EventType)
	req.Header.Set("X-Redrive-Delivery", DeliveryID(note))
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
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return resp.StatusCode, fmt.Sprintf("the receiver answered %s to %s: %v (a delivery is posted to the configured URL only; configure the final address)",
			resp.Status, locationHost(resp), ErrRedirect)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, "the receiver answered " + resp.Status
	}
	return resp.StatusCode, ""
}

// locationHost names where a redirect points, without its path or query.
func locationHost(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil {
		return "no location"
	}
	return loc.Scheme + "://" + loc.Host
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return "the webhook"
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, ErrBlockedTarget):
		return "refused to connect: the address is link-local or a cloud metadata service (" + ErrBlockedTarget.Error() + ")"
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
// {"text": summary and link}. In a Slack message the summary, which holds failure fields, is
// escaped by Slack's rules (&, < and > as &amp;, &lt; and &gt;), so that a field can neither
// mention (<!channel>, <@U…>) nor make a link; the link is Slack's <URL> form.
func Body(format string, payload map[string]any) ([]byte, error) {
	if format != FormatSlack {
		return json.Marshal(payload)
	}
	text, _ := payload["summary"].(string)
	text = SlackEscape(text)
	if data, ok := payload["data"].(map[string]any); ok {
		if link, ok := data["link"].(string); ok && link != "" {
			text += " <" + SlackEscape(strings.ReplaceAll(link, "|", "%7C")) + ">"
		}
	}
	return json.Marshal(map[string]string{"text": text})
}

// slackEscaper replaces the three characters Slack's message text interprets.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackEscape escapes s for the text of a Slack message: &, < and > become &amp;, &lt; and
// &gt;, Slack's control characters; nothing else is changed.
func SlackEscape(s string) string { return slackEscaper.Replace(s) }
