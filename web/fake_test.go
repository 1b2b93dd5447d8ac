package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// fakeBackend is an in-memory Backend for the handler tests.
type fakeBackend struct {
	mu       sync.Mutex
	failures []*FailureDetail // newest first
	groups   []*Group
	retried  []uuid.UUID
	now      time.Time
}

func (b *fakeBackend) add(d *FailureDetail) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = append([]*FailureDetail{d}, b.failures...)
}

func (b *fakeBackend) matches(f Filter, d *FailureDetail) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, d.State),
		len(f.Temporalities) > 0 && !slices.Contains(f.Temporalities, d.Temporality),
		f.Topic != "" && f.Topic != d.Topic,
		f.PublisherService != "" && f.PublisherService != d.PublisherService,
		f.MessageType != "" && f.MessageType != d.MessageType,
		f.ErrorCode != "" && f.ErrorCode != d.ErrorCode,
		f.GroupID != 0 && f.GroupID != d.GroupID,
		f.Search != "" && !strings.Contains(strings.ToLower(d.ErrorMessage), strings.ToLower(f.Search)),
		f.Key != "" && !bytes.Equal([]byte(f.Key), d.Key),
		!f.From.IsZero() && d.ReceivedAt.Before(f.From),
		!f.To.IsZero() && !d.ReceivedAt.Before(f.To):
		return false
	}
	return true
}

func (b *fakeBackend) ListFailures(_ context.Context, q ListQuery) (FailurePage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	start := 0
	if q.Cursor != "" {
		n, err := strconv.Atoi(q.Cursor)
		if err != nil {
			return FailurePage{}, fmt.Errorf("%w: bad cursor", ErrInvalid)
		}
		start = n
	}
	var all []FailureRow
	for _, d := range b.failures {
		if b.matches(q.Filter, d) {
			all = append(all, d.FailureRow)
		}
	}
	if start > len(all) {
		start = len(all)
	}
	end := min(start+q.Limit, len(all))
	p := FailurePage{Items: all[start:end]}
	if end < len(all) {
		p.Next = strconv.Itoa(end)
	}
	return p, nil
}

func (b *fakeBackend) find(id uuid.UUID) *FailureDetail {
	for _, d := range b.failures {
		if d.ID == id {
			return d
		}
	}
	return nil
}

func (b *fakeBackend) Failure(_ context.Context, id uuid.UUID) (*FailureDetail, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.find(id)
	if d == nil {
		return nil, ErrNotFound
	}
	c := *d
	c.Chain = nil
	for i := len(b.failures) - 1; i >= 0; i-- {
		if o := b.failures[i]; o.CausingMessage == d.CausingMessage {
			c.Chain = append(c.Chain, o.FailureRow)
		}
	}
	return &c, nil
}

func (b *fakeBackend) Stats(_ context.Context, since time.Time, width time.Duration) (*Stats, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &Stats{ByState: map[store.State]int64{}, ByTemporality: map[avro.Temporality]int64{}}
	topics, services := map[string]int64{}, map[string]int64{}
	buckets := map[time.Time]int64{}
	for _, d := range b.failures {
		st.ByState[d.State]++
		if d.State.Resendable() {
			st.ByTemporality[d.Temporality]++
			topics[d.Topic]++
			services[d.PublisherService]++
			if st.OldestOpen == nil || d.ReceivedAt.Before(*st.OldestOpen) {
				t := d.ReceivedAt
				st.OldestOpen = &t
			}
		}
		if !d.ReceivedAt.Before(since) {
			buckets[since.Add(d.ReceivedAt.Sub(since)/width*width)]++
		}
	}
	st.TopTopics, st.TopServices = top(topics, topN), top(services, topN)
	for t, n := range buckets {
		st.Buckets = append(st.Buckets, Bucket{Start: t, Count: n})
	}
	return st, nil
}

func (b *fakeBackend) ListGroups(_ context.Context, q GroupQuery) (GroupPage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := GroupPage{}
	for _, g := range b.groups {
		c := *g
		c.OpenCount, c.TotalCount = 0, 0
		for _, d := range b.failures {
			if d.GroupID == g.ID {
				c.TotalCount++
				if d.State.Resendable() {
					c.OpenCount++
				}
			}
		}
		p.Items = append(p.Items, c)
	}
	return p, nil
}

func (b *fakeBackend) UpdateGroup(_ context.Context, id int64, u GroupUpdate, by Principal) (*Group, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.groups {
		if g.ID == id {
			g.Ticket, g.Note = u.Ticket, u.Note
			c := *g
			return &c, nil
		}
	}
	return nil, ErrNotFound
}

func (b *fakeBackend) targets(t Target) []*FailureDetail {
	var out []*FailureDetail
	if len(t.IDs) > 0 {
		for _, id := range t.IDs {
			if d := b.find(id); d != nil {
				out = append(out, d)
			}
		}
		return out
	}
	for i := len(b.failures) - 1; i >= 0 && (t.Limit == 0 || len(out) < t.Limit); i-- {
		if d := b.failures[i]; b.matches(t.Filter, d) && d.State.Resendable() {
			out = append(out, d)
		}
	}
	return out
}

func (b *fakeBackend) CountMatching(_ context.Context, t Target) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t.Limit = 0
	var n int64
	for _, d := range b.targets(t) {
		if d.State.Resendable() {
			n++
		}
	}
	return n, nil
}

func (b *fakeBackend) act(t Target, req ActionRequest, action string, to store.State) ActionResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	var r ActionResult
	found := b.targets(t)
	r.NotFound = len(t.IDs) - len(found)
	if len(t.IDs) == 0 {
		r.NotFound = 0
	}
	for _, d := range found {
		if !d.State.Resendable() {
			r.Skipped++
			continue
		}
		d.Audit = append(d.Audit, AuditEntry{At: b.now, Action: action, Principal: req.Principal, Reason: req.Reason,
			Details: map[string]any{"from_state": string(d.State)}})
		d.State = to
		if to == store.StateClosed {
			d.ClosedReason, d.ClosedBy = req.Reason, req.Principal
		} else {
			b.retried = append(b.retried, d.ID)
		}
		r.Done++
	}
	return r
}

func (b *fakeBackend) Retry(_ context.Context, t Target, req ActionRequest) (ActionResult, error) {
	return b.act(t, req, "retry", store.StateResent), nil
}

func (b *fakeBackend) Close(_ context.Context, t Target, req ActionRequest) (ActionResult, error) {
	if req.Reason == "" {
		return ActionResult{}, fmt.Errorf("%w: a reason is required", ErrInvalid)
	}
	return b.act(t, req, "close", store.StateClosed), nil
}

// fakeAuth knows a fixed set of tokens, and a proxy user when the request names one.
type fakeAuth struct {
	tokens map[string]Principal
	proxy  bool
}

func (a fakeAuth) Token(_ context.Context, token string) (Principal, error) {
	if p, ok := a.tokens[token]; ok {
		return p, nil
	}
	return Principal{}, ErrUnauthenticated
}

func (a fakeAuth) Proxy(r *http.Request) (Principal, bool, error) {
	if u := r.Header.Get("X-Forwarded-User"); a.proxy && u != "" {
		return Principal{Name: u, Role: RoleViewer}, true, nil
	}
	return Principal{}, false, nil
}
