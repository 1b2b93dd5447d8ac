package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// Every list and count by state reads the same failures, in the same order, whichever relation
// finds them (failure_not_resent for the states other than RESENT, the states' group index for
// a group, the records for RESENT, migration 026), as the failures view says, through changes
// of state that delete and insert rows of failure_not_resent.
func TestListsByStateMatchTheView(t *testing.T) {
	t.Parallel()
	s, pool := fixtureStore(t)
	ctx := context.Background()
	states := []store.State{store.StateRetryPending, store.StatePermanent, store.StateResent, store.StateClosed}
	base := time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC)
	for i := range 48 {
		insertFixture(t, pool, fixtureRow{
			State: states[i%4], Topic: []string{"a", "b"}[i%2], PublisherService: []string{"s1", "s2", "s3"}[i%3],
			Temporality: []avro.Temporality{avro.Temporary, avro.Permanent}[i/4%2],
			CreatedAt:   base.Add(time.Duration(i/2) * 24 * time.Hour), // pairs share a created_at, over several weeks
		})
	}
	// Marks, a reopen and a close, as the store's statements change them.
	for _, q := range []string{
		`UPDATE failure_states SET state = 'RESENT', resent_at = now(), updated_at = now()
		 WHERE id IN (SELECT id FROM failure_states WHERE state = 'RETRY_PENDING' ORDER BY id LIMIT 3)`,
		`UPDATE failure_states SET state = 'RETRY_PENDING', next_attempt_at = now(), updated_at = now()
		 WHERE id IN (SELECT id FROM failure_states WHERE state = 'RESENT' ORDER BY id DESC LIMIT 2)`,
		`UPDATE failure_states SET state = 'CLOSED', closed_reason = 'done', updated_at = now()
		 WHERE id IN (SELECT id FROM failure_states WHERE state = 'PERMANENT' ORDER BY id LIMIT 2)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var group int64
	if err := pool.QueryRow(ctx, `SELECT group_id FROM failures WHERE publisher_service = 's2' LIMIT 1`).Scan(&group); err != nil {
		t.Fatal(err)
	}
	var filters []store.Filter
	for _, sts := range [][]store.State{
		nil, {store.StateRetryPending}, {store.StatePermanent}, {store.StateResent}, {store.StateClosed},
		{store.StateRetryPending, store.StatePermanent}, {store.StateResent, store.StateClosed}, {store.StateClosed, store.StatePermanent},
	} {
		filters = append(filters,
			store.Filter{States: sts},
			store.Filter{States: sts, GroupID: group},
			store.Filter{States: sts, Temporalities: []avro.Temporality{avro.Permanent}},
			store.Filter{States: sts, Topic: "b"},
			store.Filter{States: sts, CreatedFrom: base.Add(5 * 24 * time.Hour), CreatedTo: base.Add(15 * 24 * time.Hour)})
	}
	for _, f := range filters {
		name := fmt.Sprintf("%+v", f)
		var want []uuid.UUID
		rows, err := pool.Query(ctx, `
			SELECT id FROM failures
			WHERE (cardinality($1::text[]) = 0 OR state = ANY($1)) AND ($2 = 0 OR group_id = $2)
			  AND (cardinality($3::text[]) = 0 OR temporality = ANY($3)) AND ($4 = '' OR original_topic = $4)
			  AND ($5::timestamptz IS NULL OR created_at >= $5) AND ($6::timestamptz IS NULL OR created_at < $6)
			ORDER BY created_at DESC, id DESC`,
			stateNames(f.States), f.GroupID, temporalityNames(f.Temporalities), f.Topic, nullTime(f.CreatedFrom), nullTime(f.CreatedTo))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		rows.Close()
		for _, order := range []store.Order{store.NewestFirst, store.OldestFirst} {
			var (
				got   []uuid.UUID
				after *store.Position
			)
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatalf("%s: too many pages", name)
				}
				page, more, err := s.ListFailures(ctx, store.ListParams{Filter: f, Order: order, After: after, Limit: 5})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, r := range page {
					got = append(got, r.ID)
				}
				if !more {
					break
				}
				p := page[len(page)-1].Position()
				after = &p
			}
			if order == store.OldestFirst {
				slices.Reverse(got)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, order %d: %d failures %v, want %d %v", name, order, len(got), got, len(want), want)
			}
		}
		n, err := s.CountFailures(ctx, f)
		if err != nil || n != int64(len(want)) {
			t.Errorf("%s: CountFailures = %d, %v; want %d", name, n, err, len(want))
		}
		c, capped, err := s.CountFailuresCapped(ctx, f, 3)
		if err != nil || c != min(int64(len(want)), 3) || capped != (len(want) > 3) {
			t.Errorf("%s: CountFailuresCapped = %d, %v, %v; want %d", name, c, capped, err, len(want))
		}
	}
	// The open counts of the groups and the open breakdown agree with the view.
	groups, _, err := s.ListGroups(ctx, store.GroupListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		var open, total int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('RETRY_PENDING', 'PERMANENT')), count(*) FROM failures WHERE group_id = $1`, g.ID).
			Scan(&open, &total); err != nil {
			t.Fatal(err)
		}
		if g.OpenCount != open || g.TotalCount != total {
			t.Errorf("group %d: open %d, total %d; want %d, %d", g.ID, g.OpenCount, g.TotalCount, open, total)
		}
	}
	ob, err := s.OpenFailures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var open int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM failures WHERE state IN ('RETRY_PENDING', 'PERMANENT')`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if ob.Total != open {
		t.Errorf("OpenFailures total %d, want %d", ob.Total, open)
	}
}

func stateNames(states []store.State) []string {
	out := []string{}
	for _, s := range states {
		out = append(out, string(s))
	}
	return out
}

func temporalityNames(ts []avro.Temporality) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, string(t))
	}
	return out
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
