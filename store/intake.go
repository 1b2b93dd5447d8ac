package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redrive/redrive/avro"
)

// Incoming is one decoded MessageProcessingFailedEvent on its way into the store.
type Incoming struct {
	// Event is the decoded event. Required.
	Event *avro.Event
	// Headers are the failed record's exact headers, in order with duplicates and null values
	// (avro.Metadata.OriginalHeaders).
	Headers []avro.Header
	// ValueNull marks a null original value (a tombstone): the row stores NULL whatever
	// Event.Payload.OriginalMessage holds, and a resend produces a null value.
	ValueNull bool
	// Source says where the intake read the failure. The zero value is an MPFE from an
	// unknown position.
	Source Source
}

// Prepared is an Incoming that Prepare validated, with its causing message derived: the form in
// which the intake hands events to IngestPrepared, so that each is checked once.
type Prepared struct {
	row ingestRow
}

// Prepare validates in (ValidateIncoming) and derives its causing message and group once. It
// returns a *BadDataError (Index -1) when Postgres cannot store in as it is.
func Prepare(in Incoming) (Prepared, error) { return prepare(-1, in) }

func prepare(i int, in Incoming) (Prepared, error) {
	cause, err := validateIncoming(i, in)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{row: newIngestRow(in, cause)}, nil
}

// CausingMessage returns the identity of the message that caused the failure (CausingMessage).
func (p Prepared) CausingMessage() string { return p.row.causingMessage }

// Incoming returns the validated event.
func (p Prepared) Incoming() Incoming { return p.row.in }

// NextAttemptFunc returns when the failure with the given attempt number (1-based) should be
// resent, and false when its retries are exhausted. resend.Backoff.Next is one.
type NextAttemptFunc func(attempt int, now time.Time) (time.Time, bool)

// IngestOutcome says what became of one event of a batch.
type IngestOutcome struct {
	// ID is the failure's id: the new row's, or the existing row's for a duplicate.
	ID uuid.UUID
	// Duplicate is true when a failure with the same idempotenceId already existed (in the
	// database or earlier in the batch); nothing was written for it.
	Duplicate bool
	// State, Attempt and GroupID are those of the row (new or existing).
	State   State
	Attempt int
	GroupID int64
}

// IngestResult sums up an ingested batch.
type IngestResult struct {
	// Inserted counts the new rows; Duplicates the events that were already stored.
	Inserted   int
	Duplicates int
	// Outcomes is parallel to the batch.
	Outcomes []IngestOutcome
}

// maxIngestTries bounds the reruns of a batch that raced with a concurrent insert of the same
// idempotenceId.
const maxIngestTries = 3

// Ingest stores a batch of events in one transaction, idempotently: an event whose
// idempotenceId is already stored, or appears earlier in the batch, is a duplicate and writes
// nothing. Each new failure joins its group (created on first sight; its last_seen updated),
// gets its attempt number (1 + the failures already stored for its causing message, counted in
// batch order) and its state: a TEMPORARY failure is RETRY_PENDING at next(attempt, now), or
// PERMANENT with state_reason "retries exhausted" when next says so; PERMANENT and UNKNOWN
// failures are PERMANENT.
//
// An event that Postgres cannot store as it is makes Ingest return a *BadDataError (wrapping
// ErrBadData) and write nothing; any other error is worth retrying with the same batch.
// docs/intake.md describes the statements.
func (s *Store) Ingest(ctx context.Context, batch []Incoming, next NextAttemptFunc) (IngestResult, error) {
	prepared := make([]Prepared, len(batch))
	for i, in := range batch {
		p, err := prepare(i, in)
		if err != nil {
			return IngestResult{}, fmt.Errorf("ingest: %w", err)
		}
		prepared[i] = p
	}
	return s.IngestPrepared(ctx, prepared, next)
}

// IngestPrepared is Ingest for events that Prepare validated already: it does not check them
// again.
func (s *Store) IngestPrepared(ctx context.Context, batch []Prepared, next NextAttemptFunc) (IngestResult, error) {
	if next == nil {
		return IngestResult{}, errors.New("ingest: NextAttempt is required")
	}
	if len(batch) == 0 {
		return IngestResult{}, nil
	}
	rows := make([]ingestRow, len(batch))
	for i, p := range batch {
		if p.row.in.Event == nil {
			return IngestResult{}, fmt.Errorf("ingest: event %d was not prepared (store.Prepare)", i)
		}
		rows[i] = p.row
	}
	for try := 1; ; try++ {
		res, raced, err := s.ingestOnce(ctx, rows, next)
		if err != nil {
			return IngestResult{}, fmt.Errorf("ingest: %w", classify(err))
		}
		if !raced {
			return res, nil
		}
		if try == maxIngestTries {
			return IngestResult{}, fmt.Errorf("ingest: events inserted concurrently by another instance %d times in a row", try)
		}
	}
}

// groupKey is the natural key of a failure group.
type groupKey struct {
	publisherService, messageType, errorCode, stackTraceHash string
}

// ingestRow is one event prepared for the failures table.
type ingestRow struct {
	in             Incoming
	causingMessage string
	group          groupKey
	headerNames    []string
	headerValues   [][]byte
}

func newIngestRow(in Incoming, cause string) ingestRow {
	e := in.Event
	r := ingestRow{
		in:             in,
		causingMessage: cause,
		group: groupKey{
			publisherService: e.Publisher.Service,
			errorCode:        e.References.ErrorType.Code,
			stackTraceHash:   deref(e.Payload.StackTraceHash),
		},
		headerNames:  make([]string, len(in.Headers)),
		headerValues: make([][]byte, len(in.Headers)),
	}
	r.group.messageType = messageType(e)
	for i, h := range in.Headers {
		r.headerNames[i] = h.Name
		r.headerValues[i] = h.Value
	}
	return r
}

// ingestOnce runs one transaction for the batch. raced reports that a concurrent transaction
// inserted one of the events between the duplicate check and the insert; the transaction was
// rolled back and the batch must run again (its duplicate check then sees the row).
func (s *Store) ingestOnce(ctx context.Context, rows []ingestRow, next NextAttemptFunc) (res IngestResult, raced bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return IngestResult{}, false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	existing, counts, err := lookupExisting(ctx, tx, rows)
	if err != nil {
		return IngestResult{}, false, err
	}

	now := s.now()
	res.Outcomes = make([]IngestOutcome, len(rows))
	fresh := make([]int, 0, len(rows))           // indexes of the rows to insert
	firstSeen := make(map[string]int, len(rows)) // idempotenceId -> index of its first row
	dupOf := make(map[int]int)                   // index of a repeat in the batch -> its first row
	for i := range rows {
		idem := rows[i].in.Event.Identity.IdempotenceID
		if o, ok := existing[idem]; ok {
			res.Outcomes[i] = o
			res.Duplicates++
			continue
		}
		if j, ok := firstSeen[idem]; ok {
			dupOf[i] = j
			res.Duplicates++
			continue
		}
		firstSeen[idem] = i
		id, err := uuid.NewV7()
		if err != nil {
			return IngestResult{}, false, fmt.Errorf("new id: %w", err)
		}
		cm := rows[i].causingMessage
		counts[cm]++
		res.Outcomes[i] = IngestOutcome{ID: id, Attempt: int(counts[cm])}
		fresh = append(fresh, i)
	}
	if len(fresh) == 0 {
		if err := tx.Commit(ctx); err != nil {
			return IngestResult{}, false, fmt.Errorf("commit: %w", err)
		}
		return res, false, nil
	}

	groups, err := ensureGroups(ctx, tx, rows, fresh, now)
	if err != nil {
		return IngestResult{}, false, err
	}
	w := newIngestWrite(len(fresh))
	for _, i := range fresh {
		o := &res.Outcomes[i]
		o.GroupID = groups[rows[i].group]
		var nextAt *time.Time
		var reason *string
		o.State, nextAt, reason = initialState(rows[i].in.Event.References.ErrorType.Temporality, o.Attempt, now, next)
		w.add(&rows[i], o, nextAt, reason, now)
	}
	// The duplicate check above and these inserts run in one transaction; a concurrent
	// transaction that inserted one of the idempotenceIds since makes the insert of the keys
	// fail on their primary key, and the batch runs again (its check then sees the row).
	if err := w.write(ctx, tx, groups, now); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "failure_keys_pkey" {
			return IngestResult{}, true, nil
		}
		return IngestResult{}, false, err
	}
	if err := writeLinks(ctx, tx, rows, fresh, res.Outcomes, now); err != nil {
		return IngestResult{}, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return IngestResult{}, false, fmt.Errorf("commit: %w", err)
	}
	res.Inserted = len(fresh)
	for i, j := range dupOf { // a repeat within the batch shows its first row
		res.Outcomes[i] = res.Outcomes[j]
		res.Outcomes[i].Duplicate = true
	}
	return res, false, nil
}

// initialState is the state of a new failure by temporality and attempt.
func initialState(t avro.Temporality, attempt int, now time.Time, next NextAttemptFunc) (State, *time.Time, *string) {
	if t != avro.Temporary {
		return StatePermanent, nil, nil
	}
	at, ok := next(attempt, now)
	if !ok {
		reason := StateReasonRetriesExhausted
		return StatePermanent, nil, &reason
	}
	return StateRetryPending, &at, nil
}

// lookupExisting returns, in one round trip, the stored failures among the batch's
// idempotenceIds and the number of stored failures per causing message.
func lookupExisting(ctx context.Context, tx pgx.Tx, rows []ingestRow) (map[string]IngestOutcome, map[string]int64, error) {
	idems := make([]string, 0, len(rows))
	causes := make([]string, 0, len(rows))
	for _, r := range rows {
		idems = append(idems, r.in.Event.Identity.IdempotenceID)
		causes = append(causes, r.causingMessage)
	}
	slices.Sort(idems)
	slices.Sort(causes)
	idems, causes = slices.Compact(idems), slices.Compact(causes)

	b := &pgx.Batch{}
	// The look-ups probe the indexes, a few microseconds per key, whatever the table's size and
	// statistics. Left to itself, Postgres scans failures sequentially for them while the
	// table is young (before an ANALYZE, or up to tens of thousands of rows, or with a generic
	// plan cached when it was empty), which makes a bulk intake quadratic. The setting ends
	// with the transaction.
	b.Queue(`SET LOCAL enable_seqscan = off`)
	b.Queue(`
		SELECT k.idempotence_id, k.failure_id, s.state, r.attempt, s.group_id
		FROM failure_keys k
		JOIN failure_states s ON s.id = k.failure_id AND s.created_at = k.created_at
		JOIN failure_records r ON r.id = k.failure_id AND r.created_at = k.created_at
		WHERE k.idempotence_id = ANY($1)`, idems)
	b.Queue(`SELECT causing_message, count(*) FROM failure_records WHERE causing_message = ANY($1) GROUP BY causing_message`, causes)
	br := tx.SendBatch(ctx, b)
	defer br.Close()

	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("set enable_seqscan: %w", err)
	}
	existing := make(map[string]IngestOutcome)
	dup, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("look up idempotence ids: %w", err)
	}
	for dup.Next() {
		var idem string
		o := IngestOutcome{Duplicate: true}
		if err := dup.Scan(&idem, &o.ID, &o.State, &o.Attempt, &o.GroupID); err != nil {
			dup.Close()
			return nil, nil, fmt.Errorf("look up idempotence ids: %w", err)
		}
		existing[idem] = o
	}
	if err := dup.Err(); err != nil {
		return nil, nil, fmt.Errorf("look up idempotence ids: %w", err)
	}

	counts := make(map[string]int64)
	cnt, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("count failures per causing message: %w", err)
	}
	for cnt.Next() {
		var cm string
		var n int64
		if err := cnt.Scan(&cm, &n); err != nil {
			cnt.Close()
			return nil, nil, fmt.Errorf("count failures per causing message: %w", err)
		}
		counts[cm] = n
	}
	if err := cnt.Err(); err != nil {
		return nil, nil, fmt.Errorf("count failures per causing message: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("look up existing failures: %w", err)
	}
	return existing, counts, nil
}

// ensureGroups returns the ids of the fresh rows' groups, creating the missing ones (keys
// sorted, so that concurrent batches meet in the same order). It takes no lock on an existing
// group: two instances ingesting failures of the same group do not wait for each other here.
func ensureGroups(ctx context.Context, tx pgx.Tx, rows []ingestRow, fresh []int, now time.Time) (map[groupKey]int64, error) {
	distinct := make(map[groupKey]struct{})
	for _, i := range fresh {
		distinct[rows[i].group] = struct{}{}
	}
	keys := make([]groupKey, 0, len(distinct))
	for k := range distinct {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		return cmp.Or(strings.Compare(a.publisherService, b.publisherService), strings.Compare(a.messageType, b.messageType),
			strings.Compare(a.errorCode, b.errorCode), strings.Compare(a.stackTraceHash, b.stackTraceHash))
	})
	cols := [4][]string{}
	for _, k := range keys {
		cols[0] = append(cols[0], k.publisherService)
		cols[1] = append(cols[1], k.messageType)
		cols[2] = append(cols[2], k.errorCode)
		cols[3] = append(cols[3], k.stackTraceHash)
	}

	// Two statements: the SELECT runs with a new snapshot, so it also sees a group that a
	// concurrent transaction committed while the INSERT waited for it.
	b := &pgx.Batch{}
	b.Queue(insertGroupsSQL, cols[0], cols[1], cols[2], cols[3], now)
	b.Queue(selectGroupsSQL, cols[0], cols[1], cols[2], cols[3])
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("create groups: %w", err)
	}
	gr, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("look up groups: %w", err)
	}
	out := make(map[groupKey]int64, len(keys))
	for gr.Next() {
		var k groupKey
		var id int64
		if err := gr.Scan(&id, &k.publisherService, &k.messageType, &k.errorCode, &k.stackTraceHash); err != nil {
			gr.Close()
			return nil, fmt.Errorf("look up groups: %w", err)
		}
		out[k] = id
	}
	if err := gr.Err(); err != nil {
		return nil, fmt.Errorf("look up groups: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("look up groups: %w", err)
	}
	if len(out) != len(keys) {
		return nil, fmt.Errorf("look up groups: %d of %d groups found", len(out), len(keys))
	}
	return out, nil
}

const insertGroupsSQL = `
INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash, first_seen, last_seen, created_at, updated_at)
SELECT k.publisher_service, k.message_type, k.error_code, k.stack_trace_hash, $5, $5, $5, $5
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(publisher_service, message_type, error_code, stack_trace_hash)
ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO NOTHING`

const selectGroupsSQL = `
SELECT g.id, g.publisher_service, g.message_type, g.error_code, g.stack_trace_hash
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(publisher_service, message_type, error_code, stack_trace_hash)
JOIN failure_groups g USING (publisher_service, message_type, error_code, stack_trace_hash)`

// touchGroupsSQL moves last_seen of the groups $1 (in id order) forward to $2. It runs last
// before the commit, so that the row locks it takes are held only for the commit.
//
// The locks are taken in id order by a SELECT … ORDER BY id FOR NO KEY UPDATE, and only then
// are the rows updated: an UPDATE … WHERE id = ANY(…) alone locks the rows in the order its plan
// visits them (an index scan in id order, a bitmap or sequential scan in physical order, which
// updates keep changing), so two instances touching overlapping groups could lock them in
// opposite orders and deadlock. FOR NO KEY UPDATE, the lock an UPDATE of last_seen takes, does
// not conflict with the KEY SHARE locks that the foreign key of concurrent inserts holds.
const touchGroupsSQL = `
WITH locked AS (
	SELECT id FROM failure_groups WHERE id = ANY($1) AND last_seen < $2 ORDER BY id FOR NO KEY UPDATE
)
UPDATE failure_groups g SET last_seen = $2 FROM locked WHERE g.id = locked.id AND g.last_seen < $2`

// recordColumns are the columns of failure_records that Ingest writes, in the order of
// ingestRow.record.
var recordColumns = []string{
	"id", "created_at", "temporality", "error_code", "error_message", "error_description", "stack_trace_ref", "stack_trace_hash",
	"event_id", "idempotence_id", "event_created", "publisher_system", "publisher_service", "process_id",
	"original_topic", "original_partition", "original_offset", "original_key", "original_value", "header_names", "header_values",
	"message_id", "message_idempotence_id", "message_created", "message_system", "message_service", "message_type", "message_type_version",
	"causing_message", "attempt", "source_format", "source_topic", "source_partition", "source_offset",
	"cluster",
}

// record returns the failure_records row of r for recordColumns; traceRef is the stack
// trace's hash in failure_texts (nil without a stack trace).
func (r *ingestRow) record(o *IngestOutcome, traceRef []byte, now time.Time) []any {
	e := r.in.Event
	p := &e.Payload
	md := p.FailedMessageMetadata
	if md == nil {
		md = &avro.Metadata{}
	}
	value := p.OriginalMessage
	if r.in.ValueNull {
		value = nil // NULL: a tombstone
	} else if value == nil {
		value = []byte{}
	}
	src := r.in.Source
	var srcTopic *string
	var srcPartition *int32
	var srcOffset *int64
	if src.Topic != "" {
		srcTopic, srcPartition, srcOffset = &src.Topic, &src.Partition, &src.Offset
	}
	return []any{
		o.ID, now, string(e.References.ErrorType.Temporality), e.References.ErrorType.Code, p.ErrorMessage,
		p.ErrorDescription, traceRef, p.StackTraceHash,
		e.Identity.EventID, e.Identity.IdempotenceID, e.Identity.Created, e.Publisher.System, e.Publisher.Service, e.ProcessID,
		e.References.Message.TopicName, e.References.Message.Partition, e.References.Message.Offset, p.OriginalKey, value,
		r.headerNames, r.headerValues,
		md.EventID, md.IdempotenceID, md.Created, md.System, md.Service, md.MessageTypeName, md.MessageTypeVersion,
		r.causingMessage, o.Attempt, string(sourceFormat(src)), srcTopic, srcPartition, srcOffset,
		sourceCluster(src),
	}
}

// messageType is the group key's message type: the metadata's messageTypeName, or "".
func messageType(e *avro.Event) string {
	if md := e.Payload.FailedMessageMetadata; md != nil {
		return deref(md.MessageTypeName)
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// StateStatsByCluster is StateStats per cluster (failure_records.cluster): a cluster without
// failures is absent; each present one has a count for every state. It first lists the
// clusters that have failures (a skip scan of the records' cluster index, a few probes per
// partition); when there is one, it counts the states alone, as StateStats does, and joins
// the states with the records only when failures of several clusters are stored.
func (s *Store) StateStatsByCluster(ctx context.Context) (map[string]StateStats, error) {
	clusters, err := s.storedClusters(ctx)
	if err != nil {
		return nil, err
	}
	switch len(clusters) {
	case 0:
		return map[string]StateStats{}, nil
	case 1:
		st, err := s.StateStats(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]StateStats{clusters[0]: st}, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT r.cluster, s.state, count(*), min(s.created_at)
		FROM failure_states s JOIN failure_records r ON r.id = s.id AND r.created_at = s.created_at
		GROUP BY r.cluster, s.state`)
	if err != nil {
		return nil, fmt.Errorf("state stats by cluster: %w", err)
	}
	defer rows.Close()
	out := map[string]StateStats{}
	for rows.Next() {
		var cluster string
		var state State
		var n int64
		var oldest time.Time
		if err := rows.Scan(&cluster, &state, &n, &oldest); err != nil {
			return nil, fmt.Errorf("state stats by cluster: %w", err)
		}
		st, ok := out[cluster]
		if !ok {
			st = StateStats{Counts: make(map[State]int64, len(States)), Oldest: make(map[State]time.Time, len(States))}
			for _, state := range States {
				st.Counts[state] = 0
			}
			out[cluster] = st
		}
		st.Counts[state] = n
		st.Oldest[state] = oldest
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state stats by cluster: %w", err)
	}
	return out, nil
}

// storedClusters lists the distinct clusters of the stored failures, walking the records'
// (cluster, created_at, id) index from one cluster to the next instead of reading every entry.
func (s *Store) storedClusters(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE c(cluster) AS (
			SELECT min(cluster) FROM failure_records
			UNION ALL
			SELECT (SELECT min(r.cluster) FROM failure_records r WHERE r.cluster > c.cluster)
			FROM c WHERE c.cluster IS NOT NULL)
		SELECT cluster FROM c WHERE cluster IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("stored clusters: %w", err)
	}
	clusters, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("stored clusters: %w", err)
	}
	return clusters, nil
}

// StateStats counts the failures by state and finds the oldest of each state: the states
// other than RESENT from failure_not_resent_state_idx, RESENT as all failures less those, and
// its oldest by walking the records in created order (no index holds the state, migration
// 026).
func (s *Store) StateStats(ctx context.Context) (StateStats, error) {
	st := StateStats{Counts: make(map[State]int64, len(States)), Oldest: make(map[State]time.Time, len(States))}
	for _, state := range States {
		st.Counts[state] = 0
	}
	rows, err := s.pool.Query(ctx, `
		WITH held AS (SELECT state, count(*) AS n, min(created_at) AS oldest FROM failure_not_resent GROUP BY state)
		SELECT state, n, oldest FROM held
		UNION ALL
		SELECT 'RESENT', t.n, (
			SELECT r.created_at FROM failure_records r
			WHERE EXISTS (SELECT 1 FROM failure_states s WHERE s.id = r.id AND s.created_at = r.created_at AND s.state = 'RESENT')
			ORDER BY r.created_at LIMIT 1)
		FROM (SELECT (SELECT count(*) FROM failure_states) - (SELECT coalesce(sum(n), 0) FROM held) AS n) t
		WHERE t.n > 0`)
	if err != nil {
		return StateStats{}, fmt.Errorf("state stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var state State
		var n int64
		var oldest time.Time
		if err := rows.Scan(&state, &n, &oldest); err != nil {
			return StateStats{}, fmt.Errorf("state stats: %w", err)
		}
		st.Counts[state] = n
		st.Oldest[state] = oldest
	}
	if err := rows.Err(); err != nil {
		return StateStats{}, fmt.Errorf("state stats: %w", err)
	}
	return st, nil
}
