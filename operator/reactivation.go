package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/redrive/redrive"
)

// ReactivateRequest asks to feed the service's own dead-letter topic back through the intake:
// up to Limit records, or (UpToNow) up to its end as it is now, from where the last run
// stopped. What still fails stays on the topic.
type ReactivateRequest struct {
	Principal string
	Reason    string
	Limit     int64
	UpToNow   bool
}

// MaxReactivateLimit bounds the records one reactivation reads when given a limit.
const MaxReactivateLimit = 10_000_000

// Reactivate starts a reactivation run in the background (on this instance) and returns it;
// Reactivation shows its progress. Bad input is an *InputError; a run already going (on any
// instance) wraps redrive.ErrConflict; a service without a reactivator wraps redrive.ErrUnavailable.
func (c *Core) Reactivate(ctx context.Context, req ReactivateRequest) (*redrive.Reactivation, error) {
	reason, err := CheckText("reason", req.Reason, MaxReasonLen)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Limit != 0 && req.UpToNow:
		return nil, invalid("limit", "give a limit or up_to_now, not both")
	case req.Limit == 0 && !req.UpToNow:
		return nil, invalid("limit", "give a limit (1 to %d records) or up_to_now", MaxReactivateLimit)
	case req.Limit < 0 || req.Limit > MaxReactivateLimit:
		return nil, invalid("limit", "%d is not from 1 to %d", req.Limit, MaxReactivateLimit)
	case c.cfg.Reactivate == nil:
		return nil, fmt.Errorf("%w: this server does not reactivate its dead-letter topic", redrive.ErrUnavailable)
	}
	req.Reason = reason
	run, err := c.cfg.Reactivate(context.WithoutCancel(ctx), req)
	if errors.Is(err, redrive.ErrConflict) {
		return nil, fmt.Errorf("%w: %s", redrive.ErrConflict, err.Error())
	}
	return run, err
}

// ReactivationPage is a page of reactivation runs, newest first.
type ReactivationPage struct {
	Items []redrive.Reactivation
	// Next is the cursor of the next (older) page; empty on the last.
	Next string
}

// Reactivations returns a page of the reactivation runs of the own dead-letter topic, newest
// first: the first page when cursor is empty, else the page after the one whose Next it is.
func (c *Core) Reactivations(ctx context.Context, limit int, cursor string) (*ReactivationPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, err
	}
	var before int64
	if cursor != "" {
		if before, err = decodeReactivationCursor(cursor); err != nil {
			return nil, err
		}
	}
	page := &ReactivationPage{Items: []redrive.Reactivation{}}
	if c.cfg.DeadLetterTopic == "" {
		return page, nil
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	runs, more, err := c.store.ListReactivations(ctx, c.cfg.DeadLetterTopic, before, limit)
	if err != nil {
		return nil, err
	}
	page.Items = runs
	if more && len(runs) > 0 {
		page.Next = encodeReactivationCursor(runs[len(runs)-1].ID)
	}
	return page, nil
}

// ReactivationView is a reactivation run with its audit entries.
type ReactivationView struct {
	*redrive.Reactivation
	Audit []redrive.AuditEntry
}

// Reactivation returns a run with its progress and audit, or an error wrapping redrive.ErrNotFound.
func (c *Core) Reactivation(ctx context.Context, id int64) (*ReactivationView, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	r, err := c.store.ReactivationByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	audit, err := c.store.ReactivationAudit(ctx, id)
	if err != nil {
		return nil, err
	}
	return &ReactivationView{Reactivation: r, Audit: audit}, nil
}
