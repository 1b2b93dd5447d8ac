package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redrive/redrive/avro"
)

// ListParams selects a page of failures.
type ListParams struct {
	Filter Filter
	Order  Order
	// After, when set, starts the page after this position in Order.
	After *Position
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
}

const summaryColumns = `f.id, f.state, f.state_reason, f.temporality, f.error_code, left(f.error_message, 500),
	f.publisher_system, f.publisher_service, f.original_topic, f.original_partition, f.original_offset,
	f.message_type, f.causing_message, f.attempt, f.group_id, octet_length(f.original_key),
	coalesce(octet_length(f.original_value), 0), f.original_value IS NULL, f.source_format, f.source_topic,
	f.next_attempt_at, f.resent_at, f.closed_at, f.event_created, f.created_at, f.updated_at, f.cluster`

func scanSummaries(rows pgx.Rows) ([]FailureSummary, error) {
	defer rows.Close()
	out := []FailureSummary{}
	for rows.Next() {
		var s FailureSummary
		if err := rows.Scan(&s.ID, &s.State, &s.StateReason, &s.Temporality, &s.ErrorCode, &s.ErrorMessage,
			&s.PublisherSystem, &s.PublisherService, &s.Topic, &s.Partition, &s.Offset,
			&s.MessageType, &s.CausingMessage, &s.Attempt, &s.GroupID, &s.KeySize,
			&s.ValueSize, &s.ValueNull, &s.SourceFormat, &s.SourceTopic, &s.NextAttemptAt, &s.ResentAt, &s.ClosedAt, &s.EventCreated,
			&s.CreatedAt, &s.UpdatedAt, &s.Cluster); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// listSQL builds the statement of a failure page.
func listSQL(p *ListParams) (string, sqlArgs, error) {
	return listSQLColumns(p, summaryColumns)
}

// listSQLColumns builds the statement of a failure page that selects columns.
func listSQLColumns(p *ListParams, columns string) (string, sqlArgs, error) {
	if err := p.Filter.Validate(); err != nil {
		return "", nil, err
	}
	if err := sqlFilter(&p.Filter); err != nil {
		return "", nil, err
	}
	if p.Limit < 1 || p.Limit > MaxListLimit {
		return "", nil, &FilterError{Field: "limit", Detail: fmt.Sprintf("%d is not between 1 and %d", p.Limit, MaxListLimit)}
	}
	var args sqlArgs
	conds := conditions(&p.Filter, &args)
	cmp, dir := "<", "DESC"
	if p.Order == OldestFirst {
		cmp, dir = ">", "ASC"
	}
	if p.After != nil {
		conds = append(conds, fmt.Sprintf("(f.created_at, f.id) %s (%s, %s)", cmp, args.add(p.After.CreatedAt), args.add(p.After.ID)))
	}
	// The limit is a literal, not a parameter: the generic plan of a statement whose limit it
	// does not know expects a tenth of the rows and joins every record with its state (13 s
	// for a page at 1,000,000 failures, against 1 ms for the plan that reads the first rows).
	order := fmt.Sprintf(" ORDER BY f.created_at %s, f.id %s LIMIT %d", dir, dir, p.Limit+1)
	if src := stateDriven(&p.Filter); src != "" {
		// The page is found in failure_not_resent or failure_states alone, in the order of
		// its own index (created_at, or state or group, then created_at), and only its rows
		// are joined with their records: the view joins the state on a range of created_at
		// (migration 020), so an order by the record's created_at cannot be read from an
		// index of the states.
		return "SELECT " + columns + " FROM failures f JOIN (SELECT f.id, f.created_at FROM " + src + " f" +
			whereClause(conds) + order + ") p ON f.created_at = p.created_at AND f.id = p.id" + order, args, nil
	}
	return "SELECT " + columns + " FROM failures f" + whereClause(conds) + order, args, nil
}

// ListFailureValues returns one page of the failures that p selects, as ListFailures does,
// with the original value of each (nil for a tombstone), and whether more follow it: the
// candidates of a decoded field search, which the operator core decodes and matches.
func (s *Store) ListFailureValues(ctx context.Context, p ListParams) ([]FailureSummary, [][]byte, bool, error) {
	q, args, err := listSQLColumns(&p, summaryColumns+", f.original_value")
	if err != nil {
		return nil, nil, false, err
	}
	var (
		out    []FailureSummary
		values [][]byte
	)
	err = s.searchQuery(ctx, &p.Filter, func(db querier) error {
		rows, err := db.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				x FailureSummary
				v []byte
			)
			if err := rows.Scan(&x.ID, &x.State, &x.StateReason, &x.Temporality, &x.ErrorCode, &x.ErrorMessage,
				&x.PublisherSystem, &x.PublisherService, &x.Topic, &x.Partition, &x.Offset,
				&x.MessageType, &x.CausingMessage, &x.Attempt, &x.GroupID, &x.KeySize,
				&x.ValueSize, &x.ValueNull, &x.SourceFormat, &x.SourceTopic, &x.NextAttemptAt, &x.ResentAt, &x.ClosedAt, &x.EventCreated,
				&x.CreatedAt, &x.UpdatedAt, &x.Cluster, &v); err != nil {
				return err
			}
			out, values = append(out, x), append(values, v)
		}
		return rows.Err()
	})
	var fe *FilterError
	if errors.As(err, &fe) {
		return nil, nil, false, err
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("list failure values: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], values[:p.Limit], true, nil
	}
	return out, values, false, nil
}

// ListFailures returns one page of the failures that p selects, in p.Order, and whether more
// follow it. It returns a *FilterError for a filter that is not valid.
func (s *Store) ListFailures(ctx context.Context, p ListParams) ([]FailureSummary, bool, error) {
	q, args, err := listSQL(&p)
	if err != nil {
		return nil, false, err
	}
	var out []FailureSummary
	err = s.searchQuery(ctx, &p.Filter, func(db querier) error {
		rows, err := db.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		out, err = scanSummaries(rows)
		return err
	})
	var fe *FilterError
	if errors.As(err, &fe) {
		return nil, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("list failures: %w", err)
	}
	if len(out) > p.Limit {
		return out[:p.Limit], true, nil
	}
	return out, false, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// searchQuery runs fn in a read-only transaction: with the generic plan of each statement for
// a filter of plain criteria (genericPlan), and bounded by PayloadTimeout for a filter
// with a payload search; a search that runs out of that time is a *FilterError on "payload"
// saying it is too broad.
//
// The generic plan: a list reads the partitions of every period (partitions.go), and planning
// such a statement for its parameters costs more than running it (2–25 ms against under 1 ms
// for a page, with ten partitions, more under load). The generic plan, made once per connection
// and statement, prunes the partitions when it runs; for the plain criteria its shape is the
// same. The criteria whose match count depends on their value keep their custom plans: how
// many rows a key prefix, a trace id, a header, a text or a payload matches decides which
// index serves them.
func (s *Store) searchQuery(ctx context.Context, f *Filter, fn func(querier) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// A page is at most MaxListLimit rows: parallel workers never pay for their start
		// (tens of milliseconds on a busy server), and the planner picks them for a search whose
		// rows it cannot estimate.
		set := []string{"SET LOCAL max_parallel_workers_per_gather = 0"}
		if genericPlan(f) {
			set = append(set, "SET LOCAL plan_cache_mode = force_generic_plan")
		}
		if f.Payload != nil {
			set = append(set, fmt.Sprintf("SET LOCAL statement_timeout = %d", PayloadTimeout.Milliseconds()))
		}
		if _, err := tx.Exec(ctx, strings.Join(set, "; ")); err != nil {
			return err
		}
		return fn(tx)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" { // query_canceled by the statement timeout
		return &FilterError{Field: "payload", Detail: fmt.Sprintf("%s: the payload search did not finish in %s: narrow it with a shorter time range or more criteria", ErrTooBroad, PayloadTimeout)}
	}
	return err
}

// CountFailuresCapped counts the failures that f selects, up to limit: it returns limit and
// true when there are more, so that a total stays cheap at any table size.
func (s *Store) CountFailuresCapped(ctx context.Context, f Filter, limit int) (int64, bool, error) {
	if err := f.Validate(); err != nil {
		return 0, false, err
	}
	if err := sqlFilter(&f); err != nil {
		return 0, false, err
	}
	var args sqlArgs
	conds := conditions(&f, &args)
	lim := args.add(limit + 1)
	var n int64
	err := s.searchQuery(ctx, &f, func(q querier) error {
		return q.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+countSource(&f)+" f"+whereClause(conds)+" LIMIT "+lim+") c", args...).Scan(&n)
	})
	if err != nil {
		var fe *FilterError
		if errors.As(err, &fe) {
			return 0, false, err
		}
		return 0, false, fmt.Errorf("count failures: %w", err)
	}
	if n > int64(limit) {
		return int64(limit), true, nil
	}
	return n, false, nil
}

// ExplainList returns the plan of the statement ListFailures runs for p, executed with
// EXPLAIN (ANALYZE, BUFFERS), for benchmarks and diagnosis.
func (s *Store) ExplainList(ctx context.Context, p ListParams) (string, error) {
	q, args, err := listSQL(&p)
	if err != nil {
		return "", err
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		return "", fmt.Errorf("explain list: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("explain list: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}

// CountFailures counts the failures that f selects, limited to the given states when any.
func (s *Store) CountFailures(ctx context.Context, f Filter, states ...State) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	if err := sqlFilter(&f); err != nil {
		return 0, err
	}
	var args sqlArgs
	conds := conditions(&f, &args)
	if len(states) > 0 {
		conds = append(conds, "f.state = ANY("+args.add(stateStrings(states))+"::text[])")
	}
	var n int64
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+countSource(&f, states...)+" f"+whereClause(conds), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count failures: %w", err)
	}
	return n, nil
}

// FailureIDs returns up to limit ids of the failures that f selects in one of states (any
// state when none is given), oldest first, starting after the position after when it is not
// nil, and the position of the last id returned (nil when none was). It pages through a bulk
// action.
func (s *Store) FailureIDs(ctx context.Context, f Filter, states []State, after *Position, limit int) ([]uuid.UUID, *Position, error) {
	if err := f.Validate(); err != nil {
		return nil, nil, err
	}
	if err := sqlFilter(&f); err != nil {
		return nil, nil, err
	}
	var args sqlArgs
	conds := conditions(&f, &args)
	if len(states) > 0 {
		conds = append(conds, "f.state = ANY("+args.add(stateStrings(states))+"::text[])")
	}
	if after != nil {
		conds = append(conds, fmt.Sprintf("(f.created_at, f.id) > (%s, %s)", args.add(after.CreatedAt), args.add(after.ID)))
	}
	rows, err := s.pool.Query(ctx, "SELECT f.id, f.created_at FROM failures f"+whereClause(conds)+
		" ORDER BY f.created_at, f.id LIMIT "+args.add(limit), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("failure ids: %w", err)
	}
	defer rows.Close()
	var (
		ids  []uuid.UUID
		last *Position
	)
	for rows.Next() {
		var p Position
		if err := rows.Scan(&p.ID, &p.CreatedAt); err != nil {
			return nil, nil, fmt.Errorf("failure ids: %w", err)
		}
		ids = append(ids, p.ID)
		last = &p
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("failure ids: %w", err)
	}
	return ids, last, nil
}

func stateStrings(states []State) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// FailureByID returns everything stored about the failure with id, or ErrNotFound.
func (s *Store) FailureByID(ctx context.Context, id uuid.UUID) (*FailureDetail, error) {
	var (
		d      FailureDetail
		f      = &d.Failure
		names  []string
		values [][]byte
	)
	err := s.pool.QueryRow(ctx, `
		SELECT id, state, state_reason, temporality, error_code, error_message, error_description,
			stack_trace, stack_trace_hash, event_id, idempotence_id, event_created, publisher_system,
			publisher_service, process_id, original_topic, original_partition, original_offset,
			original_key, original_value, header_names, header_values, message_id,
			message_idempotence_id, message_created, message_system, message_service, message_type,
			message_type_version, causing_message, attempt, next_attempt_at, resend_failures,
			last_resend_error, resent_at, l.owner, l.lease_until, closed_reason, closed_by,
			closed_at, group_id, created_at, updated_at, original_value IS NULL, source_format,
			source_topic, source_partition, source_offset, cluster
		FROM failures f
		LEFT JOIN LATERAL (
			SELECT c.owner, c.lease_until FROM resend_claims c
			WHERE c.lease_until > $2 AND f.id = ANY(c.failure_ids)
			ORDER BY c.lease_until DESC LIMIT 1
		) l ON true
		WHERE f.id = $1`, id, s.now()).Scan(
		&f.ID, &f.State, &d.StateReason, &f.Temporality, &f.ErrorCode, &f.ErrorMessage, &f.ErrorDescription,
		&f.StackTrace, &f.StackTraceHash, &f.EventID, &f.IdempotenceID, &f.EventCreated, &f.PublisherSystem,
		&f.PublisherService, &f.ProcessID, &f.Topic, &f.Partition, &f.Offset,
		&f.Key, &f.Value, &names, &values, &f.MessageID,
		&f.MessageIdempotenceID, &f.MessageCreated, &f.MessageSystem, &f.MessageService, &f.MessageType,
		&f.MessageTypeVersion, &f.CausingMessage, &f.Attempt, &f.NextAttemptAt, &f.ResendFailures,
		&f.LastResendError, &f.ResentAt, &d.LeaseOwner, &d.LeaseUntil, &f.ClosedReason, &f.ClosedBy,
		&f.ClosedAt, &f.GroupID, &f.CreatedAt, &f.UpdatedAt, &f.ValueNull, &f.SourceFormat,
		&f.SourceTopic, &f.SourcePartition, &f.SourceOffset, &f.Cluster)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get failure: %w", err)
	}
	if len(names) != len(values) {
		return nil, fmt.Errorf("get failure %s: %d header names but %d values", id, len(names), len(values))
	}
	f.Headers = make([]avro.Header, len(names))
	for i := range names {
		f.Headers[i] = avro.Header{Name: names[i], Value: values[i]}
	}
	switch {
	case f.ValueNull:
		f.Value = nil
	case f.Value == nil:
		f.Value = []byte{}
	}
	return &d, nil
}

// AttemptChain returns the failures of one causing message, first attempt first, at most limit.
func (s *Store) AttemptChain(ctx context.Context, causingMessage string, limit int) ([]FailureSummary, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+summaryColumns+
		" FROM failures f WHERE f.causing_message = $1 ORDER BY f.attempt, f.created_at, f.id LIMIT $2",
		causingMessage, limit)
	if err != nil {
		return nil, fmt.Errorf("attempt chain: %w", err)
	}
	out, err := scanSummaries(rows)
	if err != nil {
		return nil, fmt.Errorf("attempt chain: %w", err)
	}
	return out, nil
}

// FailureAudit returns the audit entries of the failure with id, oldest first, at most limit:
// its own, and those of the job batches that acted on it (one entry per batch, shown for each
// of its items, with the item's outcome).
func (s *Store) FailureAudit(ctx context.Context, id uuid.UUID, limit int) ([]AuditEntry, error) {
	// A job's batch writes one entry; each item it acted on names it (job_items.audit_id).
	rows, err := s.pool.Query(ctx, `
		SELECT id, failure_id, group_id, action, principal, reason, details, at, 0::bigint AS seq
		FROM audit_log WHERE failure_id = $1
		UNION ALL
		SELECT a.id, i.failure_id, a.group_id, a.action, a.principal, a.reason, `+batchItemDetailsSQL+`, a.at, i.seq
		FROM job_items i JOIN audit_log a ON a.id = i.audit_id AND a.at = i.done_at AND a.job_id = i.job_id
		WHERE i.failure_id = $1 AND i.audit_id IS NOT NULL
		ORDER BY at, id, seq LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("failure audit: %w", err)
	}
	out, err := scanAuditSeq(rows)
	if err != nil {
		return nil, fmt.Errorf("failure audit: %w", err)
	}
	return stripSeq(out), nil
}

func scanAudit(rows pgx.Rows) ([]AuditEntry, error) {
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var (
			e       AuditEntry
			details []byte
		)
		if err := rows.Scan(&e.ID, &e.FailureID, &e.GroupID, &e.Action, &e.Principal, &e.Reason, &details, &e.At); err != nil {
			return nil, err
		}
		if details != nil {
			if err := json.Unmarshal(details, &e.Details); err != nil {
				return nil, fmt.Errorf("audit entry %d details: %w", e.ID, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
