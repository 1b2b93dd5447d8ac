package web

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// StoreBackend is the Backend of the running service: queries and closes on the store,
// retries through the resender, which republishes each original as stored.
type StoreBackend struct {
	store    *store.Store
	resender *resend.Resender
	now      func() time.Time
}

// StoreBackendConfig configures a StoreBackend.
type StoreBackendConfig struct {
	// Store is the failure store. Required.
	Store *store.Store
	// Resender resends failures on request. When nil, retries are refused (a read-only UI).
	Resender *resend.Resender
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Bounds of a failure's detail.
const (
	maxChain = 200
	maxAudit = 500
	// topN is the length of the overview's top lists.
	topN = 5
)

// NewStoreBackend returns a StoreBackend for cfg.
func NewStoreBackend(cfg StoreBackendConfig) (*StoreBackend, error) {
	if cfg.Store == nil {
		return nil, errors.New("invalid config: Store is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &StoreBackend{store: cfg.Store, resender: cfg.Resender, now: cfg.Now}, nil
}

// storeFilter converts f; the store validates it.
func storeFilter(f Filter) store.Filter {
	sf := store.Filter{
		States:           f.States,
		Temporalities:    f.Temporalities,
		Topic:            f.Topic,
		PublisherService: f.PublisherService,
		MessageType:      f.MessageType,
		ErrorCode:        f.ErrorCode,
		GroupID:          f.GroupID,
		Search:           f.Search,
		CreatedFrom:      f.From,
		CreatedTo:        f.To,
	}
	if f.Key != "" {
		sf.Key = []byte(f.Key)
	}
	return sf
}

// invalid turns the store's filter errors into ErrInvalid, keeping their text.
func invalid(err error) error {
	var fe *store.FilterError
	if errors.As(err, &fe) {
		return fmt.Errorf("%w: %s", ErrInvalid, fe.Error())
	}
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// ListFailures implements Backend.
func (b *StoreBackend) ListFailures(ctx context.Context, q ListQuery) (FailurePage, error) {
	var after *store.Position
	if q.Cursor != "" {
		p, err := decodeCursor(q.Cursor)
		if err != nil {
			return FailurePage{}, err
		}
		after = &store.Position{CreatedAt: p.t, ID: p.id}
	}
	rows, more, err := b.store.ListFailures(ctx, store.ListParams{Filter: storeFilter(q.Filter), After: after, Limit: q.Limit})
	if err != nil {
		return FailurePage{}, invalid(err)
	}
	page := FailurePage{}
	page.Items = make([]FailureRow, len(rows))
	for i := range rows {
		page.Items[i] = rowFromSummary(&rows[i])
	}
	if more && len(rows) > 0 {
		last := rows[len(rows)-1]
		page.Next = encodeCursor(cursor{t: last.CreatedAt, id: last.ID})
	}
	return page, nil
}

func rowFromSummary(s *store.FailureSummary) FailureRow {
	return FailureRow{
		ID: s.ID, ReceivedAt: s.CreatedAt, Topic: s.Topic, Partition: s.Partition, Offset: s.Offset,
		PublisherService: s.PublisherService, MessageType: deref(s.MessageType), ErrorCode: s.ErrorCode,
		ErrorMessage: s.ErrorMessage, Temporality: s.Temporality, State: s.State, Attempt: s.Attempt,
		NextAttemptAt: s.NextAttemptAt,
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Failure implements Backend.
func (b *StoreBackend) Failure(ctx context.Context, id uuid.UUID) (*FailureDetail, error) {
	d, err := b.store.FailureByID(ctx, id)
	if err != nil {
		return nil, invalid(err)
	}
	f := &d.Failure
	out := &FailureDetail{
		FailureRow: FailureRow{
			ID: f.ID, ReceivedAt: f.CreatedAt, Topic: f.Topic, Partition: f.Partition, Offset: f.Offset,
			PublisherService: f.PublisherService, MessageType: deref(f.MessageType), ErrorCode: f.ErrorCode,
			ErrorMessage: f.ErrorMessage, Temporality: f.Temporality, State: f.State, Attempt: f.Attempt,
			NextAttemptAt: f.NextAttemptAt,
		},
		StateReason: deref(d.StateReason), ErrorDescription: deref(f.ErrorDescription),
		StackTrace: deref(f.StackTrace), StackTraceHash: deref(f.StackTraceHash),
		EventID: f.EventID, IdempotenceID: f.IdempotenceID, FailedAt: f.EventCreated,
		PublisherSystem: f.PublisherSystem, ProcessID: deref(f.ProcessID),
		Key: f.Key, Value: f.Value, Headers: f.Headers,
		MessageID: deref(f.MessageID), MessageType: deref(f.MessageType),
		MessageTypeVersion: deref(f.MessageTypeVersion), MessageSystem: deref(f.MessageSystem),
		MessageService: deref(f.MessageService), MessageCreated: f.MessageCreated,
		CausingMessage: f.CausingMessage, ResendFailures: f.ResendFailures,
		LastResendError: deref(f.LastResendError), ResentAt: f.ResentAt,
		ClosedReason: deref(f.ClosedReason), ClosedBy: deref(f.ClosedBy), ClosedAt: f.ClosedAt,
		GroupID: f.GroupID, UpdatedAt: f.UpdatedAt,
	}
	chain, err := b.store.AttemptChain(ctx, f.CausingMessage, maxChain)
	if err != nil {
		return nil, err
	}
	for i := range chain {
		out.Chain = append(out.Chain, rowFromSummary(&chain[i]))
	}
	audit, err := b.store.FailureAudit(ctx, id, maxAudit)
	if err != nil {
		return nil, err
	}
	for _, e := range audit {
		out.Audit = append(out.Audit, AuditEntry{At: e.At, Action: e.Action, Principal: e.Principal, Reason: deref(e.Reason), Details: e.Details})
	}
	return out, nil
}

// Stats implements Backend.
func (b *StoreBackend) Stats(ctx context.Context, since time.Time, bucket time.Duration) (*Stats, error) {
	all, err := b.store.FailureStats(ctx)
	if err != nil {
		return nil, err
	}
	open, err := b.store.OpenFailures(ctx)
	if err != nil {
		return nil, err
	}
	buckets, err := b.store.FailuresOverTime(ctx, since, bucket)
	if err != nil {
		return nil, err
	}
	st := &Stats{
		ByState:       all.ByState,
		ByTemporality: open.ByTemporality,
		TopTopics:     top(open.ByTopic, topN),
		TopServices:   top(open.ByPublisherService, topN),
	}
	for _, t := range []*time.Time{all.OldestPending, all.OldestPermanent} {
		if t != nil && (st.OldestOpen == nil || t.Before(*st.OldestOpen)) {
			st.OldestOpen = t
		}
	}
	for _, bk := range buckets {
		st.Buckets = append(st.Buckets, Bucket{Start: bk.Start, Count: bk.Count})
	}
	return st, nil
}

// top returns the n names with the highest counts, ties by name.
func top(counts map[string]int64, n int) []NameCount {
	out := make([]NameCount, 0, len(counts))
	for name, c := range counts {
		if c > 0 {
			out = append(out, NameCount{Name: name, Count: c})
		}
	}
	slices.SortFunc(out, func(a, b NameCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out[:min(n, len(out))]
}

// ListGroups implements Backend.
func (b *StoreBackend) ListGroups(ctx context.Context, q GroupQuery) (GroupPage, error) {
	var after *store.GroupPosition
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return GroupPage{}, err
		}
		after = &store.GroupPosition{LastSeen: c.t, ID: c.n}
	}
	groups, more, err := b.store.ListGroups(ctx, store.GroupListParams{After: after, Limit: q.Limit})
	if err != nil {
		return GroupPage{}, invalid(err)
	}
	page := GroupPage{Items: make([]Group, len(groups))}
	for i := range groups {
		page.Items[i] = groupView(&groups[i])
	}
	if more && len(groups) > 0 {
		last := groups[len(groups)-1]
		page.Next = encodeCursor(cursor{t: last.LastSeen, n: last.ID})
	}
	return page, nil
}

func groupView(g *store.Group) Group {
	return Group{
		ID: g.ID, PublisherService: g.PublisherService, MessageType: g.MessageType, ErrorCode: g.ErrorCode,
		StackTraceHash: g.StackTraceHash, Ticket: deref(g.Ticket), Note: deref(g.Note),
		FirstSeen: g.FirstSeen, LastSeen: g.LastSeen, OpenCount: g.OpenCount, TotalCount: g.TotalCount,
	}
}

// UpdateGroup implements Backend: it changes only what differs, so that the audit log shows
// the edit that was made.
func (b *StoreBackend) UpdateGroup(ctx context.Context, id int64, u GroupUpdate, by Principal) (*Group, error) {
	cur, err := b.store.GroupByID(ctx, id)
	if err != nil {
		return nil, invalid(err)
	}
	var patch store.GroupPatch
	if u.Ticket != deref(cur.Ticket) {
		patch.SetTicket, patch.Ticket = true, nilIfEmpty(u.Ticket)
	}
	if u.Note != deref(cur.Note) {
		patch.SetNote, patch.Note = true, nilIfEmpty(u.Note)
	}
	if !patch.SetTicket && !patch.SetNote {
		g := groupView(cur)
		return &g, nil
	}
	g, err := b.store.UpdateGroup(ctx, id, patch, by.Name)
	if err != nil {
		return nil, invalid(err)
	}
	v := groupView(g)
	return &v, nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CountMatching implements Backend.
func (b *StoreBackend) CountMatching(ctx context.Context, t Target) (int64, error) {
	if len(t.IDs) == 0 {
		n, err := b.store.CountFailures(ctx, storeFilter(t.Filter), openStates...)
		return n, invalid(err)
	}
	states, err := b.store.ActionStates(ctx, t.IDs, b.now())
	if err != nil {
		return 0, err
	}
	var n int64
	for _, st := range states {
		if st.State.Resendable() && !st.Leased {
			n++
		}
	}
	return n, nil
}

// ids returns the ids t selects: its own, or the oldest t.Limit open ones of its filter.
func (b *StoreBackend) ids(ctx context.Context, t Target) ([]uuid.UUID, error) {
	if len(t.IDs) > 0 {
		return t.IDs, nil
	}
	if t.Limit < 1 {
		return nil, fmt.Errorf("%w: no limit for an action by filter", ErrInvalid)
	}
	ids, _, err := b.store.FailureIDs(ctx, storeFilter(t.Filter), openStates, nil, t.Limit)
	return ids, invalid(err)
}

// Retry implements Backend.
func (b *StoreBackend) Retry(ctx context.Context, t Target, req ActionRequest) (ActionResult, error) {
	if b.resender == nil {
		return ActionResult{}, fmt.Errorf("%w: this service does not resend", ErrInvalid)
	}
	ids, err := b.ids(ctx, t)
	if err != nil {
		return ActionResult{}, err
	}
	var res ActionResult
	for chunk := range slices.Chunk(ids, b.resender.MaxIDs()) {
		out, err := b.resender.ResendIDs(ctx, chunk, resend.ManualRequest{Principal: req.Principal, Reason: req.Reason})
		if errors.Is(err, resend.ErrInvalidRequest) {
			return res, fmt.Errorf("%w: %s", ErrInvalid, err.Error())
		}
		if err != nil {
			return res, fmt.Errorf("resend: %w", err)
		}
		for _, it := range out.Items {
			switch it.Outcome {
			case resend.OutcomeResent:
				res.Done++
			case resend.OutcomeNotFound:
				res.NotFound++
			case resend.OutcomeConflict:
				res.Skipped++
			default:
				res.Failed++
				res.addError(it.ID, it.Error)
			}
		}
	}
	return res, nil
}

// Close implements Backend.
func (b *StoreBackend) Close(ctx context.Context, t Target, req ActionRequest) (ActionResult, error) {
	if req.Reason == "" {
		return ActionResult{}, fmt.Errorf("%w: a reason is required", ErrInvalid)
	}
	ids, err := b.ids(ctx, t)
	if err != nil {
		return ActionResult{}, err
	}
	var details map[string]any
	if len(t.IDs) == 0 {
		details = map[string]any{"bulk_filter": t.Filter.Values().Encode()}
	}
	var res ActionResult
	for chunk := range slices.Chunk(ids, store.MaxCloseIDs) {
		out, err := b.store.CloseFailures(ctx, store.CloseRequest{IDs: chunk, Principal: req.Principal, Reason: req.Reason, Details: details})
		if err != nil {
			return res, err
		}
		for _, it := range out {
			switch it.Outcome {
			case store.CloseClosed:
				res.Done++
			case store.CloseNotFound:
				res.NotFound++
			default:
				res.Skipped++
			}
		}
	}
	return res, nil
}

// maxResultErrors bounds the error messages an ActionResult keeps.
const maxResultErrors = 5

func (r *ActionResult) addError(id uuid.UUID, msg string) {
	if len(r.Errors) < maxResultErrors {
		r.Errors = append(r.Errors, id.String()+": "+msg)
	}
}

// cursor is a position in a list: a time and a failure id or a group id.
type cursor struct {
	t  time.Time
	id uuid.UUID
	n  int64
}

// encodeCursor returns c as base64url of the time in microseconds, then the id (16 bytes) or
// the number (8 bytes).
func encodeCursor(c cursor) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.t.UnixMicro()))
	if c.id != uuid.Nil {
		b = append(b, c.id[:]...)
	} else {
		b = binary.BigEndian.AppendUint64(b, uint64(c.n))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Times of a cursor lie between the years 1 and 9999.
const (
	minCursorMicros = -62135596800000000
	maxCursorMicros = 253402300799999999
)

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || (len(b) != 24 && len(b) != 16) {
		return cursor{}, fmt.Errorf("%w: the page address is not valid: start from the first page", ErrInvalid)
	}
	micros := int64(binary.BigEndian.Uint64(b[:8]))
	if micros < minCursorMicros || micros > maxCursorMicros {
		return cursor{}, fmt.Errorf("%w: the page address is not valid: start from the first page", ErrInvalid)
	}
	c := cursor{t: time.UnixMicro(micros).UTC()}
	if len(b) == 24 {
		c.id, _ = uuid.FromBytes(b[8:])
	} else {
		c.n = int64(binary.BigEndian.Uint64(b[8:]))
	}
	return c, nil
}

var _ Backend = (*StoreBackend)(nil)
