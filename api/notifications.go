package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/redrive/redrive"
)

// notificationJSON is one notification with its delivery attempts.
type notificationJSON struct {
	ID          int64          `json:"id"`
	Webhook     string         `json:"webhook"`
	Event       string         `json:"event"`
	Payload     map[string]any `json:"payload"`
	CreatedAt   time.Time      `json:"created_at"`
	Attempts    []attemptJSON  `json:"attempts"`
	DeliveredAt *time.Time     `json:"delivered_at"`
	GaveUpAt    *time.Time     `json:"gave_up_at"`
	NextAttempt *time.Time     `json:"next_attempt_at"`
	LastError   *string        `json:"last_error"`
}

type attemptJSON struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	Status     *int      `json:"status"`
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
}

// listNotifications serves GET /notifications: the delivery log, for admins.
func (a *api) listNotifications(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, []string{"limit", "cursor"})
	var (
		limit  int
		before int64
	)
	if err == nil {
		limit, err = parseLimit(q)
	}
	if c := q.Get("cursor"); err == nil && c != "" {
		if before, err = strconv.ParseInt(c, 10, 64); err != nil || before <= 0 {
			err = badRequest("cursor", "not a cursor of this list: pass next_cursor unchanged")
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.core.Notifications(r.Context(), before, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pageOf(p.Items, newNotificationJSON, seqCursor(p.Next)))
}

// newNotificationJSON writes a notification with its delivery log.
func newNotificationJSON(n *redrive.Notification) notificationJSON {
	out := notificationJSON{ID: n.ID, Webhook: n.Webhook, Event: n.EventType, Payload: n.Payload, CreatedAt: n.CreatedAt,
		Attempts: make([]attemptJSON, len(n.Log)), DeliveredAt: n.DeliveredAt, GaveUpAt: n.GaveUpAt, LastError: n.LastError}
	if n.DeliveredAt == nil && n.GaveUpAt == nil {
		next := n.NextAttemptAt
		out.NextAttempt = &next
	}
	for j, at := range n.Log {
		out.Attempts[j] = attemptJSON{Attempt: at.Attempt, At: at.At, Error: at.Error, DurationMS: at.Duration.Milliseconds()}
		if at.Status != 0 {
			s := at.Status
			out.Attempts[j].Status = &s
		}
	}
	return out
}
