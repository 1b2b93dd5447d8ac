package operator

import (
	"context"
	"fmt"

	"github.com/redrive/redrive"
)

// ErrTracker means the issue tracker refused or could not be reached; the text says how.
//
// Deprecated: use redrive.ErrTracker, the same value.
var ErrTracker = redrive.ErrTracker

// OpenTicket opens an issue in the configured tracker for the group with id (Config.OpenTicket)
// and stores its key as the group's ticket, audited as the principal's group edit. A group
// that has a ticket already wraps redrive.ErrConflict; without a tracker, redrive.ErrUnavailable; a tracker
// failure wraps redrive.ErrTracker and changes nothing.
func (c *Core) OpenTicket(ctx context.Context, id int64, principal string) (*redrive.Group, error) {
	if c.cfg.OpenTicket == nil {
		return nil, fmt.Errorf("%w: no issue tracker is configured", redrive.ErrUnavailable)
	}
	ctx, cancel := c.actionContext(ctx)
	defer cancel()
	g, err := c.store.GroupByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	if g.Ticket != nil {
		return nil, fmt.Errorf("%w: the group has the ticket %s already", redrive.ErrConflict, *g.Ticket)
	}
	key, err := c.cfg.OpenTicket(ctx, g)
	if err != nil {
		c.log.Warn("operator: opening a ticket failed", "group", id, "error", err)
		return nil, fmt.Errorf("%w: %s", redrive.ErrTracker, err.Error())
	}
	return c.UpdateGroup(ctx, id, GroupUpdate{Ticket: &key}, principal)
}

// TicketURL returns the address of a ticket (Config.TicketURL), or "".
func (c *Core) TicketURL(ticket string) string {
	if c.cfg.TicketURL == nil || ticket == "" {
		return ""
	}
	return c.cfg.TicketURL(ticket)
}

// CanOpenTickets reports whether an issue tracker is configured (OpenTicket works).
func (c *Core) CanOpenTickets() bool { return c.cfg.OpenTicket != nil }
