package store_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func TestFilterCriteria(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	a := insertFixture(t, pool, fixtureRow{State: store.StateRetryPending, Temporality: avro.Temporary, Topic: "payments",
		ErrorMessage: "Timeout talking to 100%_ledger", CreatedAt: base, Key: []byte{0x00, 0xff}})
	b := insertFixture(t, pool, fixtureRow{State: store.StatePermanent, PublisherSystem: "crm", PublisherService: "crm-api",
		ErrorCode: "WRONG_EVENT_TYPE", MessageType: "CustomerMoved", CreatedAt: base.Add(time.Hour), Key: []byte("cust-1")})
	c := insertFixture(t, pool, fixtureRow{State: store.StateClosed, Temporality: avro.Unknown, ErrorMessage: "NullPointerException in ledger",
		CreatedAt: base.Add(2 * time.Hour), NullKey: true})
	// Two long keys that share their first 256 bytes (what the key index holds): an exact key
	// filter tells them apart.
	longKey := bytes.Repeat([]byte("k"), 300)
	longOther := append(bytes.Repeat([]byte("k"), 299), 'x')
	d := insertFixture(t, pool, fixtureRow{State: store.StateResent, CreatedAt: base.Add(-time.Hour), Key: longKey})
	e := insertFixture(t, pool, fixtureRow{State: store.StateResent, CreatedAt: base.Add(-2 * time.Hour), Key: longOther})
	var groupB int64
	if err := pool.QueryRow(context.Background(), "SELECT group_id FROM failures WHERE id = $1", b).Scan(&groupB); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		f    store.Filter
		want []uuid.UUID // newest first
	}{
		{"none", store.Filter{}, []uuid.UUID{c, b, a, d, e}},
		{"state", store.Filter{States: []store.State{store.StatePermanent}}, []uuid.UUID{b}},
		{"states", store.Filter{States: []store.State{store.StatePermanent, store.StateRetryPending}}, []uuid.UUID{b, a}},
		{"temporality", store.Filter{Temporalities: []avro.Temporality{avro.Temporary, avro.Unknown}}, []uuid.UUID{c, a}},
		{"topic", store.Filter{Topic: "payments"}, []uuid.UUID{a}},
		{"publisher system", store.Filter{PublisherSystem: "crm"}, []uuid.UUID{b}},
		{"publisher service", store.Filter{PublisherService: "crm-api"}, []uuid.UUID{b}},
		{"error code", store.Filter{ErrorCode: "WRONG_EVENT_TYPE"}, []uuid.UUID{b}},
		{"message type", store.Filter{MessageType: "CustomerMoved"}, []uuid.UUID{b}},
		{"group", store.Filter{GroupID: groupB}, []uuid.UUID{b}},
		{"binary key", store.Filter{Key: []byte{0x00, 0xff}}, []uuid.UUID{a}},
		{"text key", store.Filter{Key: []byte("cust-1")}, []uuid.UUID{b}},
		{"long key", store.Filter{Key: longKey}, []uuid.UUID{d}},
		{"long key, other tail", store.Filter{Key: longOther}, []uuid.UUID{e}},
		{"prefix of a long key is not the key", store.Filter{Key: longKey[:256]}, nil},
		{"search ignores case", store.Filter{Search: "LEDGER"}, []uuid.UUID{c, a}},
		{"search wildcards are literal", store.Filter{Search: "100%_"}, []uuid.UUID{a}},
		{"search percent only", store.Filter{Search: "%"}, []uuid.UUID{a}},
		{"search underscore only", store.Filter{Search: "_"}, []uuid.UUID{a}},
		{"search backslash", store.Filter{Search: `\`}, nil},
		{"created from", store.Filter{CreatedFrom: base.Add(time.Hour)}, []uuid.UUID{c, b}},
		{"created to is exclusive", store.Filter{CreatedTo: base.Add(time.Hour)}, []uuid.UUID{a, d, e}},
		{"combined", store.Filter{States: []store.State{store.StateRetryPending}, Topic: "payments", Search: "timeout"}, []uuid.UUID{a}},
		{"sql-ish text is data", store.Filter{Topic: "x' OR '1'='1"}, nil},
	} {
		got := listIDs(t, s, store.ListParams{Filter: tc.f, Limit: 10})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFilterValidate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		f     store.Filter
		field string
	}{
		{store.Filter{States: []store.State{"open"}}, "state"},
		{store.Filter{Temporalities: []avro.Temporality{"SOMETIMES"}}, "temporality"},
		{store.Filter{Topic: "a\x00b"}, "topic"},
		{store.Filter{ErrorCode: string([]byte{0xff, 0xfe})}, "error_code"},
		{store.Filter{MessageType: strings.Repeat("x", 1001)}, "message_type"},
		{store.Filter{Search: strings.Repeat("ü", store.MaxSearchLen+1)}, "q"},
		{store.Filter{GroupID: -1}, "group_id"},
		{store.Filter{Key: make([]byte, 64<<10+1)}, "key"},
		{store.Filter{CreatedFrom: now, CreatedTo: now}, "created_to"},
	} {
		err := tc.f.Validate()
		var fe *store.FilterError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, store.ErrBadFilter) {
			t.Errorf("Validate(%+v) = %v, want a FilterError on %s", tc.f.States, err, tc.field)
		}
	}
	ok := store.Filter{States: []store.State{store.StateClosed}, Search: strings.Repeat("ü", store.MaxSearchLen)}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
	if !(&store.Filter{}).IsZero() || (&store.Filter{Key: []byte{}}).IsZero() {
		t.Error("IsZero is wrong")
	}
}
