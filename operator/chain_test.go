package operator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
)

// A close with release is for one failure, and needs a resender; the chain is the store's.
func TestReleaseRefusalsAndChain(t *testing.T) {
	t.Parallel()
	c, s := newCore(t, nil)
	pool := s.Pool()
	head := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "chain", Offset: 1, Key: []byte("K"), ErrorCode: "X", Causing: "H"})
	parked := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "chain", Offset: 2, Key: []byte("K"), ErrorCode: avro.CodeParkedBehind, ParkedHead: "H"})
	ctx := context.Background()
	f := redrive.Filter{Topic: "chain"}
	for name, req := range map[string]operator.ActionRequest{
		"release on a retry":      {Action: operator.Retry, Release: true, Selection: operator.Selection{IDs: []uuid.UUID{head}}},
		"release by filter":       {Action: operator.Close, Release: true, Reason: "r", Selection: operator.Selection{Filter: &f}},
		"release of two failures": {Action: operator.Close, Release: true, Reason: "r", Selection: operator.Selection{IDs: []uuid.UUID{head, parked}}},
	} {
		req.Principal = "alice"
		var ie *operator.InputError
		if _, err := c.Act(ctx, req); !errors.As(err, &ie) || ie.Field != "release" {
			t.Errorf("%s: %v, want an input error on release", name, err)
		}
	}
	_, err := c.Act(ctx, operator.ActionRequest{Action: operator.Close, Release: true, Reason: "r", Principal: "alice",
		Selection: operator.Selection{IDs: []uuid.UUID{head}}})
	if !errors.Is(err, redrive.ErrUnavailable) {
		t.Errorf("release without a resender: %v, want redrive.ErrUnavailable", err)
	}
	var st redrive.State
	if err := pool.QueryRow(ctx, `SELECT state FROM failures WHERE id = $1`, head).Scan(&st); err != nil || st != redrive.StatePermanent {
		t.Errorf("a refused release changed the head to %s (%v)", st, err)
	}
	ch, err := c.ParkedChain(ctx, parked)
	if err != nil || ch.Head == nil || ch.Head.ID != head || len(ch.Parked) != 1 || ch.Parked[0].ID != parked {
		t.Errorf("chain of the parked failure: %+v %v", ch, err)
	}
	if _, err := c.ParkedChain(ctx, uuid.New()); !errors.Is(err, redrive.ErrNotFound) {
		t.Errorf("chain of an unknown id: %v, want redrive.ErrNotFound", err)
	}
}
