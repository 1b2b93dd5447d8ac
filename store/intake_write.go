package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ingestWrite collects the rows of a batch's new failures for the tables of the layout
// (migration 020): the records, the states, the idempotence keys and the stack traces, each
// trace once.
type ingestWrite struct {
	records [][]any
	// The states and keys, as parallel columns for unnest.
	ids         []uuid.UUID
	groupIDs    []int64
	temporality []string
	topics      []string
	states      []string
	reasons     []*string
	nextAts     []*time.Time
	idempotence []string
	// texts maps the SHA-256 of a stack trace to the trace.
	texts map[[32]byte]string
}

func newIngestWrite(n int) *ingestWrite {
	return &ingestWrite{
		records: make([][]any, 0, n), ids: make([]uuid.UUID, 0, n), groupIDs: make([]int64, 0, n),
		states: make([]string, 0, n), reasons: make([]*string, 0, n), nextAts: make([]*time.Time, 0, n),
		idempotence: make([]string, 0, n), texts: make(map[[32]byte]string),
	}
}

// add adds the new failure of r with its outcome o.
func (w *ingestWrite) add(r *ingestRow, o *IngestOutcome, nextAt *time.Time, reason *string, now time.Time) {
	var ref []byte
	if st := r.in.Event.Payload.StackTrace; st != nil {
		h := sha256.Sum256([]byte(*st))
		w.texts[h] = *st
		ref = h[:]
	}
	w.records = append(w.records, r.record(o, ref, now))
	w.ids = append(w.ids, o.ID)
	w.groupIDs = append(w.groupIDs, o.GroupID)
	w.temporality = append(w.temporality, string(r.in.Event.References.ErrorType.Temporality))
	w.topics = append(w.topics, r.in.Event.References.Message.TopicName)
	w.states = append(w.states, string(o.State))
	w.reasons = append(w.reasons, reason)
	w.nextAts = append(w.nextAts, nextAt)
	w.idempotence = append(w.idempotence, r.in.Event.Identity.IdempotenceID)
}

// write stores the collected failures in tx and moves their groups' last_seen to now: one
// COPY of the records, then one round trip for the texts, the keys, the states and the groups.
// A concurrent insert of one of the idempotence ids makes it fail on failure_keys_pkey.
func (w *ingestWrite) write(ctx context.Context, tx pgx.Tx, groups map[groupKey]int64, now time.Time) error {
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"failure_records"}, recordColumns, pgx.CopyFromRows(w.records)); err != nil {
		return fmt.Errorf("copy into failure_records: %w", err)
	}
	b := &pgx.Batch{}
	if len(w.texts) > 0 {
		// In hash order, so that concurrent batches lock shared texts in the same order.
		hashes := make([][]byte, 0, len(w.texts))
		for h := range w.texts {
			hashes = append(hashes, bytes.Clone(h[:]))
		}
		slices.SortFunc(hashes, bytes.Compare)
		bodies := make([]string, len(hashes))
		for i, h := range hashes {
			bodies[i] = w.texts[[32]byte(h)]
		}
		b.Queue(upsertTextsSQL, hashes, bodies, now)
	}
	b.Queue(`INSERT INTO failure_keys (idempotence_id, failure_id, created_at)
		SELECT k, id, $3 FROM unnest($1::text[], $2::uuid[]) AS u(k, id)`, w.idempotence, uuidArray(w.ids), now)
	b.Queue(`INSERT INTO failure_states (id, created_at, group_id, temporality, original_topic, state, state_reason, next_attempt_at, updated_at)
		SELECT id, $6, g, tp, tc, st, r, n, $6
		FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[], $7::text[], $8::text[]) AS u(id, g, st, r, n, tp, tc)`,
		uuidArray(w.ids), w.groupIDs, w.states, w.reasons, w.nextAts, now, w.temporality, w.topics)
	ids := make([]int64, 0, len(groups))
	for _, id := range groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b.Queue(touchGroupsSQL, ids, now)
	steps := []string{"insert stack traces", "insert idempotence keys", "insert states", "update groups' last_seen"}
	if len(w.texts) == 0 {
		steps = steps[1:]
	}
	br := tx.SendBatch(ctx, b)
	for _, step := range steps {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return fmt.Errorf("%s: %w", step, err)
		}
	}
	return br.Close()
}

// upsertTextsSQL stores the texts $2 under their hashes $1, once each; a text stored before
// gets its last_used moved to $3 when it is more than a day behind (housekeeping deletes the
// texts no stored failure can reference: retention.go).
const upsertTextsSQL = `
INSERT INTO failure_texts (hash, body, last_used)
SELECT h, b, $3 FROM unnest($1::bytea[], $2::text[]) AS u(h, b)
ON CONFLICT (hash) DO UPDATE SET last_used = EXCLUDED.last_used
WHERE failure_texts.last_used < EXCLUDED.last_used - interval '1 day'`
