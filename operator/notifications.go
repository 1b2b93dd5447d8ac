package operator

import (
	"context"

	"github.com/redrive/redrive"
)

// NotificationPage is a page of the notification delivery log, newest first.
type NotificationPage struct {
	Items []redrive.Notification
	// Next is the Before of the following page; 0 on the last page.
	Next int64
}

// Notifications returns a page of the notifications with their delivery attempts, newest
// first, with ids below before (0: from the newest). It is the admins' delivery log.
func (c *Core) Notifications(ctx context.Context, before int64, limit int) (*NotificationPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	if before < 0 {
		return nil, invalid("cursor", "not a cursor of this list: pass next_cursor unchanged")
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	items, err := c.store.ListNotifications(ctx, before, limit+1)
	if err != nil {
		return nil, err
	}
	p := &NotificationPage{Items: items}
	if len(items) > limit {
		p.Items = items[:limit]
		p.Next = p.Items[limit-1].ID
	}
	return p, nil
}
