package operator

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/store"
)

// ListRequest selects a page of failures.
type ListRequest struct {
	Filter store.Filter
	Order  store.Order
	// Limit is the page size, 1 to store.MaxListLimit. Defaults to 50.
	Limit int
	// Cursor is the Next of the previous page, in the same Order; empty for the first page.
	Cursor string
	// Total asks for the number of failures the filter selects, counted up to TotalCap.
	Total bool
}

// TotalCap is the count up to which a list's total is exact; beyond it the total says "more
// than TotalCap", so that counting stays cheap at any table size.
const TotalCap = 10000

// FailurePage is one page of failures.
type FailurePage struct {
	Items []store.FailureSummary
	// Next is the cursor of the following page; empty on the last page.
	Next string
	// Total is the number of failures the filter selects, when asked for: exact up to
	// TotalCap; TotalMore says there are more than that.
	Total     *int64
	TotalMore bool
}

// ListFailures returns one page of the failures req selects.
func (c *Core) ListFailures(ctx context.Context, req ListRequest) (*FailurePage, error) {
	limit, err := pageLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	p := store.ListParams{Filter: req.Filter, Order: req.Order, Limit: limit}
	if req.Cursor != "" {
		after, err := decodeFailureCursor(req.Cursor, req.Order)
		if err != nil {
			return nil, err
		}
		p.After = after
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	rows, more, err := c.store.ListFailures(ctx, p)
	if err != nil {
		return nil, fromStore(err)
	}
	page := &FailurePage{Items: rows}
	if more && len(rows) > 0 {
		page.Next = encodeFailureCursor(rows[len(rows)-1].Position(), req.Order)
	}
	if req.Total {
		n, over, err := c.store.CountFailuresCapped(ctx, req.Filter, TotalCap)
		if err != nil {
			return nil, fromStore(err)
		}
		page.Total, page.TotalMore = &n, over
	}
	return page, nil
}

// pageLimit returns a page size: DefaultPageSize for 0, else 1 to store.MaxListLimit.
func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n < 1 || n > store.MaxListLimit:
		return 0, invalid("limit", "%d is not from 1 to %d", n, store.MaxListLimit)
	}
	return n, nil
}

// CountFailures counts the failures f selects.
func (c *Core) CountFailures(ctx context.Context, f store.Filter) (int64, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	n, err := c.store.CountFailures(ctx, f)
	return n, fromStore(err)
}

// FailureView is everything about one failure: what is stored, the attempt chain of its
// causing message (first attempt first) and its audit entries (oldest first).
type FailureView struct {
	*store.FailureDetail
	Chain []store.FailureSummary
	Audit []store.AuditEntry
}

// Failure returns the failure with id, or an error wrapping ErrNotFound.
func (c *Core) Failure(ctx context.Context, id uuid.UUID) (*FailureView, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	d, err := c.store.FailureByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	chain, err := c.store.AttemptChain(ctx, d.CausingMessage, MaxChain)
	if err != nil {
		return nil, err
	}
	audit, err := c.store.FailureAudit(ctx, id, MaxAudit)
	if err != nil {
		return nil, err
	}
	return &FailureView{FailureDetail: d, Chain: chain, Audit: audit}, nil
}

// Part names a payload of a failure's record.
type Part string

// The parts of a record.
const (
	PartValue Part = "value"
	PartKey   Part = "key"
)

// ParsePart reads a part name; "" is the value.
func ParsePart(field, s string) (Part, error) {
	switch Part(s) {
	case "", PartValue:
		return PartValue, nil
	case PartKey:
		return PartKey, nil
	}
	return "", invalid(field, "%q is not value or key", clip.Text(s, clip.Default))
}

// Payload is one part of a failure's record, exactly as stored.
type Payload struct {
	ID    uuid.UUID
	Topic string
	Part  Part
	Bytes []byte
}

// Payload returns the key or value of the failure with id. A null key is an error wrapping
// ErrNullPart; an unknown id wraps ErrNotFound.
func (c *Core) Payload(ctx context.Context, id uuid.UUID, part Part) (*Payload, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	d, err := c.store.FailureByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	p := &Payload{ID: id, Topic: d.Topic, Part: part, Bytes: d.Value}
	if part == PartKey {
		if d.Key == nil {
			return nil, fmt.Errorf("key of %s: %w", id, ErrNullPart)
		}
		p.Bytes = d.Key
	}
	return p, nil
}

// DecodeAvro decodes a part of a record of topic framed as Avro, with its writer schema (see
// avro.PayloadDecoder). The error is an *avro.PayloadError, whose text is safe to show.
func (c *Core) DecodeAvro(topic string, part Part, b []byte) (*avro.DecodedPayload, error) {
	return c.cfg.Payloads.Decode(topic, string(part), b)
}
