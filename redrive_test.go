package redrive_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

func TestStates(t *testing.T) {
	t.Parallel()
	for _, s := range redrive.States {
		if !s.Valid() {
			t.Errorf("%s is not valid", s)
		}
		open := s == redrive.StateRetryPending || s == redrive.StatePermanent
		if s.Resendable() != open || s.Closable() != open {
			t.Errorf("%s: resendable %v, closable %v, want %v", s, s.Resendable(), s.Closable(), open)
		}
	}
	if redrive.State("OPEN").Valid() {
		t.Error("OPEN is valid")
	}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	for _, o := range redrive.Outcomes {
		if !o.Valid() {
			t.Errorf("%s is not valid", o)
		}
	}
	if redrive.Outcome("done").Valid() {
		t.Error("done is an outcome: it is a job item's")
	}
}

// The old names of the store, the operator core and the resend vocabulary are the leaf's
// values: errors.Is holds across the layers.
func TestOneVocabulary(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		old, leaf  error
		wrappedOld error
	}{
		{"store not found", store.ErrNotFound, redrive.ErrNotFound, fmt.Errorf("read: %w", store.ErrNotFound)},
		{"operator not found", operator.ErrNotFound, redrive.ErrNotFound, fmt.Errorf("read: %w", operator.ErrNotFound)},
		{"store conflict", store.ErrConflict, redrive.ErrConflict, &redrive.TransitionError{From: redrive.StateClosed, Action: "retry"}},
		{"operator conflict", operator.ErrConflict, redrive.ErrConflict, &redrive.JobStateError{}},
		{"reactivation running", operator.ErrConflict, redrive.ErrConflict, store.ErrReactivationRunning},
		{"unavailable", operator.ErrUnavailable, redrive.ErrUnavailable, fmt.Errorf("x: %w", operator.ErrUnavailable)},
		{"closed", resendtype.ErrClosed, redrive.ErrClosed, fmt.Errorf("x: %w", resendtype.ErrClosed)},
		{"bad filter", store.ErrBadFilter, redrive.ErrBadFilter, &redrive.FilterError{Field: "q"}},
		{"bad data", store.ErrBadData, redrive.ErrBadData, &redrive.BadDataError{Index: -1}},
	} {
		if c.old != c.leaf {
			t.Errorf("%s: the old name is another value", c.name)
		}
		if !errors.Is(c.wrappedOld, c.leaf) || !errors.Is(c.wrappedOld, c.old) {
			t.Errorf("%s: errors.Is does not hold for %v", c.name, c.wrappedOld)
		}
	}
	if operator.OutcomeClosed != redrive.OutcomeClosed || store.CloseClosed != redrive.OutcomeClosed ||
		resendtype.OutcomeResent != redrive.OutcomeResent || resendtype.OutcomeExhausted != redrive.OutcomeExhausted {
		t.Error("an old outcome is another value")
	}
}

func TestFilterValidate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		f     redrive.Filter
		field string
	}{
		{redrive.Filter{}, ""},
		{redrive.Filter{States: []redrive.State{redrive.StatePermanent}, Temporalities: []avro.Temporality{avro.Temporary}}, ""},
		{redrive.Filter{States: []redrive.State{"OPEN"}}, "state"},
		{redrive.Filter{SourceFormats: []redrive.SourceFormat{"csv"}}, "source_format"},
		{redrive.Filter{Topic: "a\x00b"}, "topic"},
		{redrive.Filter{Search: strings.Repeat("x", redrive.MaxSearchLen+1)}, "q"},
		{redrive.Filter{GroupID: -1}, "group_id"},
		{redrive.Filter{CreatedFrom: now, CreatedTo: now}, "created_to"},
		{redrive.Filter{KeyPrefix: []byte{}}, "key_prefix"},
		{redrive.Filter{TraceID: strings.Repeat("0", 32)}, "trace_id"},
		{redrive.Filter{HeaderValue: []byte("v")}, "header"},
		{redrive.Filter{Ticket: "T-1", NoTicket: true}, "no_ticket"},
		{redrive.Filter{Payload: []byte("abc")}, "payload"},
		{redrive.Filter{Payload: []byte("abc"), Topic: "orders"}, ""},
		{redrive.Filter{States: []redrive.State{redrive.State(strings.Repeat("é", 100) + "\xff")}}, "state"},
	} {
		err := c.f.Validate()
		var fe *redrive.FilterError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.f, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, redrive.ErrBadFilter)):
			t.Errorf("%+v: %v, want a *FilterError on %s", c.f, err, c.field)
		case fe != nil && len(fe.Detail) > 200:
			t.Errorf("%+v: the detail is %d bytes long", c.f, len(fe.Detail))
		}
	}
	if !(&redrive.Filter{}).IsZero() || (&redrive.Filter{Topic: "t"}).IsZero() {
		t.Error("IsZero")
	}
}

func TestParkedChain(t *testing.T) {
	t.Parallel()
	var ch redrive.ParkedChain
	if !ch.IsZero() || len(ch.Open()) != 0 {
		t.Error("zero chain")
	}
}
