package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/avro"
)

// chainRow is one failure of a key on a partition, as ParkedChain reads it.
type chainRow struct {
	id      uuid.UUID
	causing string
	attempt int
	state   State
	code    string
	offset  int64
}

// ParkedChain returns the ordering-guard chain of the failure with id, or ErrNotFound. A
// failure with a null key is in no chain.
//
// The chain is derived from the failures of the same topic, partition and key: each causing
// message is one member, placed at its first failure's offset and described by its latest
// failure; a member whose latest failure has the code avro.CodeParkedBehind is parked, any
// other is a head; a parked member waits for the nearest head before it. This follows the
// guard: a parked record's resend that fails for its own reason becomes the key's new head.
func (s *Store) ParkedChain(ctx context.Context, id uuid.UUID) (ParkedChain, error) {
	rows, err := s.chainRows(ctx, id)
	if err != nil || rows == nil {
		return ParkedChain{}, err
	}
	return deriveParkedChain(id, rows), nil
}

// chainRows reads the failures of the key and partition of the failure with id (the failure
// itself included, whatever the bound; beyond it the latest by offset), written against the
// failures table's columns; none for a failure with a null key.
func (s *Store) chainRows(ctx context.Context, id uuid.UUID) ([]chainRow, error) {
	var self chainRow
	var key []byte
	err := s.pool.QueryRow(ctx, `
		SELECT id, causing_message, attempt, state, error_code, original_offset, original_key
		FROM failures WHERE id = $1`, id).
		Scan(&self.id, &self.causing, &self.attempt, &self.state, &self.code, &self.offset, &key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("parked chain: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("parked chain: %w", err)
	}
	if key == nil {
		return nil, nil // a null key is not guarded: no chain
	}
	rows, err := s.pool.Query(ctx, `
		SELECT f.id, f.causing_message, f.attempt, f.state, f.error_code, f.original_offset
		FROM failures f
		WHERE f.original_topic = (SELECT original_topic FROM failures WHERE id = $1)
		  AND f.original_partition = (SELECT original_partition FROM failures WHERE id = $1)
		  AND substring(f.original_key from 1 for 256) = substring($2::bytea from 1 for 256)
		  AND f.original_key = $2::bytea
		  AND f.id <> $1
		ORDER BY f.original_offset DESC, f.attempt DESC, f.id
		LIMIT $3`, id, key, MaxParkedChain)
	if err != nil {
		return nil, fmt.Errorf("parked chain: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (chainRow, error) {
		var c chainRow
		err := r.Scan(&c.id, &c.causing, &c.attempt, &c.state, &c.code, &c.offset)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("parked chain: %w", err)
	}
	return append(out, self), nil
}

// deriveParkedChain builds the chain of the failure with id from the rows of its key and
// partition (which include it; more than MaxParkedChain rows mean a truncated read).
func deriveParkedChain(id uuid.UUID, rows []chainRow) ParkedChain {
	var chain ParkedChain
	chain.Truncated = len(rows) > MaxParkedChain
	// One member per causing message: the first failure's offset, the latest failure's state.
	type member struct {
		link         ParkedLink
		firstAttempt int
		lastAttempt  int
	}
	byCause := map[string]*member{}
	var order []*member
	mine := ""
	for _, r := range rows {
		if r.id == id {
			mine = r.causing
		}
		m := byCause[r.causing]
		if m == nil {
			m = &member{firstAttempt: r.attempt, lastAttempt: r.attempt - 1,
				link: ParkedLink{CausingMessage: r.causing, Offset: r.offset}}
			byCause[r.causing] = m
			order = append(order, m)
		}
		if r.attempt < m.firstAttempt {
			m.firstAttempt, m.link.Offset = r.attempt, r.offset
		}
		if r.attempt > m.lastAttempt {
			m.lastAttempt = r.attempt
			m.link.ID, m.link.State, m.link.ErrorCode = r.id, r.state, r.code
		}
	}
	slices.SortStableFunc(order, func(a, b *member) int {
		switch {
		case a.link.Offset < b.link.Offset:
			return -1
		case a.link.Offset > b.link.Offset:
			return 1
		}
		return 0
	})
	self := byCause[mine]
	if self == nil {
		return chain
	}
	parked := func(m *member) bool { return m.link.ErrorCode == avro.CodeParkedBehind }
	// The head: the failure itself when it is not parked, else the nearest head before it.
	var head *member
	at := slices.Index(order, self)
	if !parked(self) {
		head = self
	} else {
		for i := at - 1; i >= 0; i-- {
			if !parked(order[i]) {
				head = order[i]
				break
			}
		}
	}
	if head == nil {
		// Parked with no head among the stored failures: list the parked run it is in.
		for i := at; i >= 0 && parked(order[i]); i-- {
			at = i
		}
		for _, m := range order[at:] {
			if !parked(m) {
				break
			}
			chain.Parked = append(chain.Parked, m.link)
		}
		return chain
	}
	for _, m := range order[slices.Index(order, head)+1:] {
		if !parked(m) {
			break
		}
		chain.Parked = append(chain.Parked, m.link)
	}
	if len(chain.Parked) > 0 || head != self {
		h := head.link
		chain.Head = &h
	}
	return chain
}

// WithParkedFollowers returns those of ids whose key has failures parked by the ordering
// guard (error code avro.CodeParkedBehind) on the same topic and partition, other than of the
// failure's own causing message: the failures that may head a chain, for which ParkedChain is
// worth reading. It is one query for all ids, so that a batch of resends without chains pays
// little for the check. The order of ids is kept.
func (s *Store) WithParkedFollowers(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT h.id
		FROM failures h
		WHERE h.id = ANY($1::uuid[])
		  AND h.original_key IS NOT NULL
		  AND EXISTS (
		    SELECT 1 FROM failures f
		    WHERE f.original_topic = h.original_topic
		      AND f.original_partition = h.original_partition
		      AND substring(f.original_key from 1 for 256) = substring(h.original_key from 1 for 256)
		      AND f.original_key = h.original_key
		      AND f.error_code = $2
		      AND f.causing_message <> h.causing_message)`, ids, avro.CodeParkedBehind)
	if err != nil {
		return nil, fmt.Errorf("parked followers: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("parked followers: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	has := make(map[uuid.UUID]bool, len(found))
	for _, id := range found {
		has[id] = true
	}
	out := make([]uuid.UUID, 0, len(found))
	for _, id := range ids {
		if has[id] {
			out = append(out, id)
			delete(has, id)
		}
	}
	return out, nil
}
