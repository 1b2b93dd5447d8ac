package operator

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/store"
)

// A decoded field search (redrive.Filter.PayloadField) needs each candidate's value decoded
// with the schema registry of its cluster, so it runs here and not in SQL: the store pages
// through the candidates of the rest of the filter (Filter.SQLPart) in keyset order, and the
// core decodes each, masks it by the rules of its topic (DecodePayload, the view a reader with
// the payload permission sees) and keeps those whose field matches. The filter must be
// bounded (Filter.PayloadBounded) and one request decodes at most Config.MaxFieldScan
// candidates within redrive.PayloadTimeout.

// fieldCandidatePage is the number of candidates read from the store at a time.
const fieldCandidatePage = redrive.MaxListLimit

// FieldScan reports the scan of a decoded field search.
type FieldScan struct {
	// Scanned is the number of candidates read; Undecoded those of them whose value did not
	// decode (a tombstone, no registry, an unknown schema, bytes in no format the decoder
	// knows), which match nothing.
	Scanned   int
	Undecoded int
	// Limited says the scan stopped at Config.MaxFieldScan candidates or at
	// redrive.PayloadTimeout before the candidates ran out: the page's Next continues it.
	Limited bool
}

// fieldScanner pages through the candidates of a decoded field search.
type fieldScanner struct {
	c         *Core
	sql       redrive.Filter
	match     *redrive.PayloadFieldMatch
	order     redrive.Order
	after     *redrive.Position
	scanned   int
	undecoded int
	deadline  time.Time
}

// newFieldScanner returns a scanner of f's candidates in order, after the position after.
func (c *Core) newFieldScanner(f redrive.Filter, order redrive.Order, after *redrive.Position) *fieldScanner {
	return &fieldScanner{c: c, sql: f.SQLPart(), match: f.PayloadFieldMatch(), order: order, after: after,
		deadline: time.Now().Add(redrive.PayloadTimeout)}
}

// scan calls fn with each candidate in order and whether it matches, until fn returns false
// (stopped), the candidates run out (done), or the scan reaches its bounds (neither).
func (s *fieldScanner) scan(ctx context.Context, fn func(f *redrive.FailureSummary, matches bool) bool) (stopped, done bool, err error) {
	for {
		n := min(fieldCandidatePage, s.c.cfg.MaxFieldScan-s.scanned)
		if n <= 0 || (s.scanned > 0 && time.Now().After(s.deadline)) {
			return false, false, nil
		}
		qctx, cancel := s.c.queryContext(ctx)
		rows, values, more, err := s.c.store.ListFailureValues(qctx, store.ListParams{Filter: s.sql, Order: s.order, After: s.after, Limit: n})
		cancel()
		if err != nil {
			return false, false, fromStore(err)
		}
		for i := range rows {
			s.scanned++
			pos := rows[i].Position()
			s.after = &pos
			matches, decoded := s.c.fieldMatches(s.match, &rows[i], values[i])
			if !decoded {
				s.undecoded++
			}
			if !fn(&rows[i], matches) {
				return true, false, nil
			}
		}
		if !more {
			return false, true, nil
		}
	}
}

// fieldMatches reports whether the value of the failure f matches m: decoded with the
// decoder of its cluster and masked by the rules of its topic, as DecodePayload shows it; and
// whether it decoded. A value that does not decode, or a tombstone, matches nothing.
func (c *Core) fieldMatches(m *redrive.PayloadFieldMatch, f *redrive.FailureSummary, value []byte) (matches, decoded bool) {
	if m == nil || value == nil {
		return false, false
	}
	d, err := c.DecodePayload(&Payload{ID: f.ID, Topic: f.Topic, Cluster: f.Cluster, Part: PartValue, original: value})
	if err != nil {
		return false, false
	}
	return m.Matches(d.JSON), true
}

// listDecoded returns a page of the failures req's decoded field search selects: up to limit
// matches after the cursor's position, Next after the last of them when more may follow
// (after the last candidate scanned when the scan reached its bounds first).
func (c *Core) listDecoded(ctx context.Context, req ListRequest, limit int, after *redrive.Position) (*FailurePage, error) {
	if err := req.Filter.Validate(); err != nil {
		return nil, fromStore(err)
	}
	if req.Total {
		return nil, invalid(ParamPayloadField, "a decoded field search has no total: it would decode every candidate; list it page by page")
	}
	sc := c.newFieldScanner(req.Filter, req.Order, after)
	var items []redrive.FailureSummary
	more := false
	stopped, done, err := sc.scan(ctx, func(f *redrive.FailureSummary, matches bool) bool {
		if !matches {
			return true
		}
		if len(items) == limit { // one more match: the page is full and another follows
			more = true
			return false
		}
		items = append(items, *f)
		return true
	})
	if err != nil {
		return nil, err
	}
	page := &FailurePage{Items: items, FieldScan: &FieldScan{Scanned: sc.scanned, Undecoded: sc.undecoded, Limited: !stopped && !done}}
	if page.Items == nil {
		page.Items = []redrive.FailureSummary{}
	}
	switch {
	case more || (page.FieldScan.Limited && len(items) == limit):
		page.Next = encodeFailureCursor(items[len(items)-1].Position(), req.Order)
	case page.FieldScan.Limited && sc.after != nil:
		page.Next = encodeFailureCursor(*sc.after, req.Order)
	}
	return page, nil
}

// decodedIDs returns the ids of the failures in one of states (any when none) that f's
// decoded field search selects, oldest first. Candidates beyond Config.MaxFieldScan, or not
// decoded within redrive.PayloadTimeout, are an unprocessable *InputError on payload_field:
// an action or a job acts on exactly the matches, so the scan must finish.
func (c *Core) decodedIDs(ctx context.Context, f redrive.Filter, states []redrive.State) ([]uuid.UUID, error) {
	if err := f.Validate(); err != nil {
		return nil, fromStore(err)
	}
	if len(states) > 0 {
		if len(f.States) > 0 {
			states = slices.DeleteFunc(slices.Clone(states), func(s redrive.State) bool { return !slices.Contains(f.States, s) })
			if len(states) == 0 {
				return nil, nil
			}
		}
		f.States = states
	}
	sc := c.newFieldScanner(f, redrive.OldestFirst, nil)
	var ids []uuid.UUID
	_, done, err := sc.scan(ctx, func(s *redrive.FailureSummary, matches bool) bool {
		if matches {
			ids = append(ids, s.ID)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if !done {
		return nil, unprocessable(ParamPayloadField, "the decoded field search has more candidates than one request decodes (%d, within %s): narrow its bounds (time range, topic, group) so that every match is known", c.cfg.MaxFieldScan, redrive.PayloadTimeout)
	}
	return ids, nil
}
