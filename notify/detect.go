package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redrive/redrive"
)

// event is one detected event.
type event struct {
	key     string // the dedupe key
	at      time.Time
	summary string // one line for people (Slack)
	data    map[string]any
}

// maxRelayPages bounds the pages of events one Detect turns into notifications, so that a
// round also delivers; the rest come next round.
const maxRelayPages = 100

// Detect turns the waiting events into notifications, a page (BatchSize events) per
// transaction, until none is left that another instance does not hold, then looks for busy
// groups.
func (n *Notifier) Detect(ctx context.Context) error {
	var errs []error
	for range maxRelayPages {
		taken, err := n.cfg.Store.RelayNotifyEvents(ctx, n.cfg.BatchSize, n.build)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if taken < n.cfg.BatchSize || ctx.Err() != nil {
			break
		}
	}
	if n.cfg.Threshold >= 0 && n.anyWants(EventGroupThreshold) {
		if err := n.busyGroups(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EventGroupThreshold, err))
		}
	}
	return errors.Join(errs...)
}

// build turns a page of events into one notification per webhook that wants each. It runs in
// the transaction that takes the events.
func (n *Notifier) build(_ context.Context, events []redrive.NotifyEvent) ([]redrive.Notification, error) {
	now := n.cfg.Now()
	var out []redrive.Notification
	for i := range events {
		se := &events[i]
		if !n.anyWants(se.EventType) {
			continue
		}
		e, ok := n.describe(se)
		if !ok {
			continue // its subject is gone: nothing to tell
		}
		out = append(out, n.notifications(se.EventType, e, now)...)
	}
	if err := n.step(stepRelayed); err != nil {
		return nil, err
	}
	return out, nil
}

// notifications returns the notifications of e, one per webhook that wants its type.
func (n *Notifier) notifications(name string, e event, now time.Time) []redrive.Notification {
	var ns []redrive.Notification
	for _, w := range n.hooks {
		if !w.wants(name) {
			continue
		}
		payload := map[string]any{"event": name, "at": e.at.UTC().Format(time.RFC3339Nano), "summary": e.summary, "data": e.data}
		ns = append(ns, redrive.Notification{Webhook: w.Name, EventType: name, DedupeKey: e.key, Payload: payload, CreatedAt: now})
	}
	return ns
}

// describe makes the event of a stored one; false when its subject is gone.
func (n *Notifier) describe(se *redrive.NotifyEvent) (event, bool) {
	switch {
	case se.EventType == EventGroupNew && se.Group != nil:
		g := se.Group
		return event{key: EventGroupNew + ":" + se.Subject, at: g.FirstSeen,
			summary: fmt.Sprintf("New kind of failure: %s in %s (%s)", g.ErrorCode, g.PublisherService, orDash(g.MessageType)),
			data:    groupData(g, n.link(fmt.Sprintf("/failures?group_id=%d", g.ID)))}, true
	case se.EventType == EventFailureExhausted && se.Failure != nil:
		f := se.Failure
		return event{key: EventFailureExhausted + ":" + f.ID.String(), at: se.At,
			summary: fmt.Sprintf("Retries exhausted: %s on %s (%s), now PERMANENT", f.ErrorCode, f.Topic, f.PublisherService),
			data: map[string]any{"failure_id": f.ID.String(), "topic": f.Topic, "error_code": f.ErrorCode,
				"publisher_service": f.PublisherService, "group_id": f.GroupID, "attempt": f.Attempt,
				"link": n.link("/failures/" + f.ID.String())}}, true
	case se.EventType == EventJobFinished && se.Job != nil:
		j := se.Job
		at := se.At
		if j.FinishedAt != nil {
			at = *j.FinishedAt
		}
		return event{key: EventJobFinished + ":" + j.ID.String(), at: at,
			summary: fmt.Sprintf("Job %s (%s) %s: %d done, %d skipped, %d failed of %d", j.ID, j.Action, strings.ToLower(string(j.State)), j.Done, j.Skipped, j.Failed, j.Total),
			data: map[string]any{"job_id": j.ID.String(), "action": j.Action, "state": string(j.State), "total": j.Total,
				"done": j.Done, "skipped": j.Skipped, "failed": j.Failed, "principal": j.Principal, "link": n.link("/jobs/" + j.ID.String())}}, true
	}
	return event{}, false
}

func (n *Notifier) link(path string) string {
	if n.cfg.BaseURL == "" {
		return ""
	}
	return n.cfg.BaseURL + path
}

// busyGroups notifies the groups with at least Threshold failures within Window, once per
// group and window (the dedupe key names the window's bucket).
func (n *Notifier) busyGroups(ctx context.Context) error {
	now := n.cfg.Now()
	groups, err := n.cfg.Store.BusyGroups(ctx, now.Add(-n.cfg.Window), n.cfg.Threshold)
	if err != nil {
		return err
	}
	bucket := now.UnixNano() / int64(n.cfg.Window)
	var ns []redrive.Notification
	for _, g := range groups {
		d := groupData(&g, n.link(fmt.Sprintf("/failures?group_id=%d", g.ID)))
		d["count"], d["window"], d["threshold"] = g.TotalCount, n.cfg.Window.String(), n.cfg.Threshold
		e := event{key: fmt.Sprintf("group.threshold:%d:%d", g.ID, bucket), at: now,
			summary: fmt.Sprintf("%d failures of %s in %s within %s", g.TotalCount, g.ErrorCode, g.PublisherService, n.cfg.Window), data: d}
		ns = append(ns, n.notifications(EventGroupThreshold, e, now)...)
	}
	_, err = n.cfg.Store.EnqueueNotifications(ctx, ns)
	return err
}

func groupData(g *redrive.Group, link string) map[string]any {
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
