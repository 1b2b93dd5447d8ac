package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// Each search criterion against a seeded database, non-UTF-8 and unicode keys included.
func TestSearchCriteria(t *testing.T) {
	t.Parallel()
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ins := func(r testkit.FailureRow) uuid.UUID { return testkit.InsertFailure(t, pool, r) }
	binKey := ins(testkit.FailureRow{Key: []byte{0xff, 0x00, 0xfe, 0x01}, Value: []byte(`{"customer":"c-1001","total":5}`)})
	uniKey := ins(testkit.FailureRow{Key: []byte("kunde-müller-ß-😀"), Causing: "evt-42",
		HeaderNames:  []string{"traceparent", "tenant", "tenant"},
		HeaderValues: [][]byte{[]byte("00-" + trace + "-00f067aa0ba902b7-01"), []byte("blue"), []byte("red")}})
	maxKey := ins(testkit.FailureRow{Key: []byte{0xff, 0xff, 0x10}, Value: []byte("binary \x00 c-1001 payload")})
	plain := ins(testkit.FailureRow{Key: []byte("order-7"), HeaderNames: []string{"TraceParent"}, HeaderValues: [][]byte{[]byte("garbage\xff")}})
	var eventID, idem, hash string
	if err := pool.QueryRow(ctx, "SELECT event_id, idempotence_id FROM failures WHERE id = $1", plain).Scan(&eventID, &idem); err != nil {
		t.Fatal(err)
	}
	hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	if _, err := pool.Exec(ctx, "UPDATE failures SET stack_trace_hash = $2 WHERE id = $1", binKey, hash); err != nil {
		t.Fatal(err)
	}
	var gid int64
	if err := pool.QueryRow(ctx, "SELECT group_id FROM failures WHERE id = $1", binKey).Scan(&gid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE failure_groups SET ticket = 'OPS-1' WHERE id = $1", gid); err != nil {
		t.Fatal(err)
	}
	var ticketed []uuid.UUID
	if err := pool.QueryRow(ctx, "SELECT array_agg(id) FROM failures WHERE group_id = $1", gid).Scan(&ticketed); err != nil {
		t.Fatal(err)
	}
	all := []uuid.UUID{binKey, uniKey, maxKey, plain}
	var unticketed []uuid.UUID
	for _, id := range all {
		if !slices.Contains(ticketed, id) {
			unticketed = append(unticketed, id)
		}
	}
	now := time.Now()
	for name, c := range map[string]struct {
		f    store.Filter
		want []uuid.UUID
	}{
		"key prefix, binary":    {store.Filter{KeyPrefix: []byte{0xff}}, []uuid.UUID{binKey, maxKey}},
		"key prefix, 0xff 0xff": {store.Filter{KeyPrefix: []byte{0xff, 0xff}}, []uuid.UUID{maxKey}},
		"key prefix, unicode":   {store.Filter{KeyPrefix: []byte("kunde-mü")}, []uuid.UUID{uniKey}},
		"key exact, unicode":    {store.Filter{Key: []byte("kunde-müller-ß-😀")}, []uuid.UUID{uniKey}},
		"key exact, binary":     {store.Filter{Key: []byte{0xff, 0x00, 0xfe, 0x01}}, []uuid.UUID{binKey}},
		"event id":              {store.Filter{EventID: eventID}, []uuid.UUID{plain}},
		"idempotence id":        {store.Filter{IdempotenceID: idem}, []uuid.UUID{plain}},
		"causing event id":      {store.Filter{CausingMessage: "evt-42"}, []uuid.UUID{uniKey}},
		"trace id":              {store.Filter{TraceID: trace}, []uuid.UUID{uniKey}},
		"header name":           {store.Filter{HeaderName: "tenant"}, []uuid.UUID{uniKey}},
		"header name=value":     {store.Filter{HeaderName: "tenant", HeaderValue: []byte("red")}, []uuid.UUID{uniKey}},
		"header value missing":  {store.Filter{HeaderName: "tenant", HeaderValue: []byte("green")}, nil},
		"stack trace hash":      {store.Filter{StackTraceHash: hash}, []uuid.UUID{binKey}},
		"ticket":                {store.Filter{Ticket: "OPS-1"}, ticketed},
		"no ticket":             {store.Filter{NoTicket: true}, unticketed},
		"payload, bounded":      {store.Filter{Payload: []byte("c-1001"), CreatedFrom: now.Add(-time.Hour), CreatedTo: now.Add(time.Hour)}, []uuid.UUID{binKey, maxKey}},
		"payload and topic":     {store.Filter{Payload: []byte("\x00 c-1"), Topic: "orders"}, []uuid.UUID{maxKey}},
	} {
		rows, _, err := s.ListFailures(ctx, store.ListParams{Filter: c.f, Limit: 50})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var got []uuid.UUID
		for _, r := range rows {
			got = append(got, r.ID)
		}
		slices.SortFunc(got, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		want := slices.Clone(c.want)
		slices.SortFunc(want, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
		n, more, err := s.CountFailuresCapped(ctx, c.f, 1)
		if err != nil || (len(want) > 1) != more || n != int64(min(len(want), 1)) {
			t.Errorf("%s: capped count %d %v %v", name, n, more, err)
		}
	}
	for name, f := range map[string]store.Filter{
		"payload unbounded":         {Payload: []byte("c-1001")},
		"payload, range too long":   {Payload: []byte("c-1001"), CreatedFrom: now.Add(-60 * 24 * time.Hour), CreatedTo: now},
		"payload too short":         {Payload: []byte("ab"), Topic: "orders"},
		"trace id not hex":          {TraceID: "xyz"},
		"trace id all zero":         {TraceID: "00000000000000000000000000000000"},
		"header value without name": {HeaderValue: []byte("x")},
		"ticket and no ticket":      {Ticket: "a", NoTicket: true},
		"empty key prefix":          {KeyPrefix: []byte{}},
		"key prefix too long":       {KeyPrefix: make([]byte, 257)},
	} {
		_, _, err := s.ListFailures(ctx, store.ListParams{Filter: f, Limit: 10})
		var fe *store.FilterError
		if !errors.As(err, &fe) || fe.Field == "" {
			t.Errorf("%s: %v, want a filter error", name, err)
		}
	}
}

// redrive_trace_id (migrations 009 and 014) takes the last traceparent header that has a
// value, whatever the case of its name, and returns its trace id, or NULL when that value is
// not a W3C traceparent.
func TestTraceIDFunction(t *testing.T) {
	t.Parallel()
	_, pool := fixtureStore(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for name, tc := range map[string]struct {
		names  []string
		values [][]byte
		want   *string
	}{
		"one":                      {[]string{"traceparent"}, [][]byte{[]byte(tp)}, ptr(id)},
		"any case":                 {[]string{"x", "TraceParent"}, [][]byte{[]byte("a"), []byte(tp)}, ptr(id)},
		"none":                     {[]string{"x"}, [][]byte{[]byte(tp)}, nil},
		"empty":                    {[]string{}, [][]byte{}, nil},
		"the last one decides":     {[]string{"traceparent", "traceparent"}, [][]byte{[]byte(tp), []byte("bad")}, nil},
		"a null value is skipped":  {[]string{"traceparent", "TRACEPARENT"}, [][]byte{[]byte(tp), nil}, ptr(id)},
		"a longer value":           {[]string{"traceparent"}, [][]byte{[]byte(tp + "-more")}, ptr(id)},
		"not utf-8":                {[]string{"traceparent"}, [][]byte{{0xff, 0xfe}}, nil},
		"upper case hex is not it": {[]string{"traceparent"}, [][]byte{[]byte(strings.ToUpper(tp))}, nil},
	} {
		var got *string
		if err := pool.QueryRow(context.Background(), `SELECT redrive_trace_id($1::text[], $2::bytea[])`, tc.names, tc.values).Scan(&got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: got %v, want %v", name, deref(got), deref(tc.want))
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
