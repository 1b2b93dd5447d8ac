package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// The chain by its stored links: a head, the failures parked behind it in offset order
// (whatever order they were stored in), a parked failure whose resend failed for its own
// reason becoming the head of those parked behind it since, later attempts placed at their
// first failure's offset, a parked failure whose head is not stored, and failures without a
// link (or with a null key) in no chain.
func TestParkedChain(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	ins := func(offset int64, causing, code string, attempt int, state store.State, head string) uuid.UUID {
		return testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "chain", Partition: 3, Offset: offset, Key: []byte("K"),
			Causing: causing, ErrorCode: code, Attempt: attempt, State: state, ParkedHead: head})
	}
	// H@10 (resent once, failed again at 40), P12 and P11 parked behind it, stored out of order,
	// then N@13 parked behind H, whose release failed for its own reason (its attempt 2 at 41),
	// and Q@14, parked behind H, then again behind N (its attempt 2 at 42).
	h1 := ins(10, "H", "PROCESSING_FAILED", 1, store.StateResent, "")
	h2 := ins(40, "H", "PROCESSING_FAILED", 2, store.StatePermanent, "")
	p12 := ins(12, "P12", avro.CodeParkedBehind, 1, store.StatePermanent, "H")
	p11 := ins(11, "P11", avro.CodeParkedBehind, 1, store.StateClosed, "H")
	n1 := ins(13, "N", avro.CodeParkedBehind, 1, store.StateResent, "H")
	n2 := ins(41, "N", "PROCESSING_FAILED", 2, store.StatePermanent, "")
	ins(14, "Q", avro.CodeParkedBehind, 1, store.StateResent, "H")
	q := ins(42, "Q", avro.CodeParkedBehind, 2, store.StatePermanent, "N")
	// Parked behind a head that is not stored (an overflow marker).
	other := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "chain", Partition: 3, Offset: 11, Key: []byte("L"),
		ErrorCode: avro.CodeParkedBehind, ParkedHead: "overflow:chain/3@11"})
	// Without a link (parked before links were stored and not backfilled) and a null key.
	unlinked := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "chain", Partition: 4, Offset: 11, Key: []byte("K"), ErrorCode: avro.CodeParkedBehind})
	null := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "chain", Partition: 3, Offset: 15, NullKey: true, ErrorCode: avro.CodeParkedBehind})

	ids := func(ls []store.ParkedLink) []uuid.UUID {
		out := make([]uuid.UUID, len(ls))
		for i, l := range ls {
			out[i] = l.ID
		}
		return out
	}
	for name, c := range map[string]struct {
		id     uuid.UUID
		head   uuid.UUID
		parked []uuid.UUID
		open   []uuid.UUID
	}{
		"head, latest attempt":  {h2, h2, []uuid.UUID{p11, p12}, []uuid.UUID{p12}},
		"head, earlier attempt": {h1, h2, []uuid.UUID{p11, p12}, []uuid.UUID{p12}},
		"parked":                {p11, h2, []uuid.UUID{p11, p12}, []uuid.UUID{p12}},
		"new head":              {n1, n2, []uuid.UUID{q}, []uuid.UUID{q}},
		"parked behind new":     {q, n2, []uuid.UUID{q}, []uuid.UUID{q}},
		"head not stored":       {other, uuid.Nil, []uuid.UUID{other}, []uuid.UUID{other}},
		"no link":               {unlinked, uuid.Nil, nil, nil},
		"null key":              {null, uuid.Nil, nil, nil},
	} {
		ch, err := s.ParkedChain(ctx, c.id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var head uuid.UUID
		if ch.Head != nil {
			head = ch.Head.ID
		}
		if head != c.head || !slices.Equal(ids(ch.Parked), c.parked) || !slices.Equal(ids(ch.Open()), c.open) || ch.Truncated {
			t.Errorf("%s: head %s parked %v open %v, want %s %v %v", name, head, ids(ch.Parked), ids(ch.Open()), c.head, c.parked, c.open)
		}
		if name == "parked" && (ch.Parked[0].Offset != 11 || ch.Head.Offset != 10 || ch.Head.CausingMessage != "H" || ch.HeadRef != "H") {
			t.Errorf("parked: links %+v head %+v", ch.Parked, ch.Head)
		}
		if name == "parked behind new" && ch.Parked[0].Offset != 14 {
			t.Errorf("a later attempt is placed at its first failure's offset: %+v", ch.Parked)
		}
	}
	if open, err := s.OpenFollowers(ctx, "H", 10); err != nil || !slices.Equal(ids(open), []uuid.UUID{p12}) {
		t.Errorf("open followers of H: %v %v, want [%s]", ids(open), err, p12)
	}
	// A head with nothing parked, and a failure of a key with no chain: in none.
	lone := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "chain", Partition: 5, Key: []byte("K")})
	if ch, err := s.ParkedChain(ctx, lone); err != nil || !ch.IsZero() {
		t.Errorf("lone failure: %+v %v", ch, err)
	}
	if _, err := s.ParkedChain(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown id: %v, want ErrNotFound", err)
	}
}

// WithParkedFollowers keeps, in order, the ids whose causing message has open failures linked
// to it; a failure whose followers are all resent, a parked failure itself, one without
// followers and an unknown id are left out.
func TestWithParkedFollowers(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	head := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "follow", Partition: 1, Offset: 10, Key: []byte("K"), Causing: "H", ErrorCode: "X"})
	testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "follow", Partition: 1, Offset: 11, Key: []byte("K"), Causing: "P", ErrorCode: avro.CodeParkedBehind, ParkedHead: "H"})
	lone := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "follow", Partition: 1, Offset: 12, Key: []byte("L"), Causing: "L", ErrorCode: "X"})
	done := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "follow", Partition: 1, Offset: 13, Key: []byte("D"), Causing: "D", ErrorCode: "X"})
	testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "follow", Partition: 1, Offset: 14, Key: []byte("D"), Causing: "D2",
		ErrorCode: avro.CodeParkedBehind, ParkedHead: "D", State: store.StateResent})
	self := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "follow", Partition: 1, Offset: 15, Key: []byte("M"), Causing: "M",
		ErrorCode: avro.CodeParkedBehind, ParkedHead: "L"})

	ids := []uuid.UUID{lone, self, done, head, uuid.New()}
	// The same ids with their created_at (an unknown id with any time), as the scheduler and
	// the jobs pass them: each record is then read by its primary key.
	created := make([]time.Time, len(ids))
	for i, id := range ids {
		if err := pool.QueryRow(ctx, `SELECT coalesce((SELECT created_at FROM failure_states WHERE id = $1), now())`, id).Scan(&created[i]); err != nil {
			t.Fatal(err)
		}
	}
	// And with their causing messages (the unknown id's is none of the chains'), as the scheduler
	// and the jobs pass them: then no record is read.
	causing := []string{"L", "M", "D", "H", "unknown"}
	for _, h := range []store.ChainHeads{{IDs: ids}, {IDs: ids, CreatedAt: created}, {IDs: ids, Causing: causing}} {
		got, err := s.WithParkedFollowers(ctx, h)
		if err != nil || !slices.Equal(got, []uuid.UUID{lone, head}) {
			t.Errorf("with parked followers (created_at %v, causing %v): %v %v, want [%s %s]", h.CreatedAt != nil, h.Causing != nil, got, err, lone, head)
		}
		// A parked failure itself is a candidate too: resent, it releases those behind it.
		got, err = s.ChainCandidates(ctx, h)
		if err != nil || !slices.Equal(got, []uuid.UUID{lone, self, head}) {
			t.Errorf("chain candidates (created_at %v, causing %v): %v %v, want [%s %s %s]", h.CreatedAt != nil, h.Causing != nil, got, err, lone, self, head)
		}
	}
	// A created_at that is not the failure's finds nothing.
	wrong := slices.Clone(created)
	wrong[3] = wrong[3].Add(-time.Hour)
	if got, err := s.WithParkedFollowers(ctx, store.ChainHeads{IDs: ids, CreatedAt: wrong}); err != nil || !slices.Equal(got, []uuid.UUID{lone}) {
		t.Errorf("wrong created_at: %v %v, want [%s]", got, err, lone)
	}
	if _, err := s.WithParkedFollowers(ctx, store.ChainHeads{IDs: ids, CreatedAt: created[:2]}); err == nil {
		t.Error("created_at not parallel to ids: no error")
	}
	if _, err := s.WithParkedFollowers(ctx, store.ChainHeads{IDs: ids, Causing: causing[:2]}); err == nil {
		t.Error("causing messages not parallel to ids: no error")
	}
	if got, err := s.WithParkedFollowers(ctx, store.ChainHeads{}); err != nil || got != nil {
		t.Errorf("no ids: %v %v", got, err)
	}
}

// DeleteOrphanLinks deletes the links whose failure is gone, stored before the cutoff, and
// keeps the others.
func TestDeleteOrphanLinks(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)
	kept := testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: "orphan", Key: []byte("K"), ErrorCode: avro.CodeParkedBehind,
		ParkedHead: "H", CreatedAt: old})
	if _, err := pool.Exec(ctx, `INSERT INTO failure_links (failure_id, created_at, head) VALUES ($1, $2, 'H'), ($3, now(), 'H')`,
		uuid.New(), old, uuid.New()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteOrphanLinks(ctx, time.Now().Add(-time.Hour)); err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want the one old orphan", n, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM failure_links WHERE failure_id = $1`, kept).Scan(&left); err != nil || left != 1 {
		t.Errorf("the link of a stored failure: %d (%v), want kept", left, err)
	}
}
