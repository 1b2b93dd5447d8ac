package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/avro"
)

// TransferRecord is a failure as it moves between redrive installations (export, import):
// every stored field (the cluster included: empty imports as DefaultCluster), and its group's
// kind and operator-set fields.
type TransferRecord struct {
	Failure     Failure
	StateReason *string
	Group       GroupKind
}

// transferColumns are the failures' columns an export reads and an import writes, in order;
// group_id is mapped through the group's kind.
var transferColumns = []string{
	"id", "state", "state_reason", "temporality", "error_code", "error_message", "error_description", "stack_trace",
	"stack_trace_hash", "event_id", "idempotence_id", "event_created", "publisher_system", "publisher_service", "process_id",
	"original_topic", "original_partition", "original_offset", "original_key", "original_value", "header_names", "header_values",
	"message_id", "message_idempotence_id", "message_created", "message_system", "message_service", "message_type",
	"message_type_version", "causing_message", "attempt", "next_attempt_at", "resend_failures", "last_resend_error",
	"resent_at", "closed_reason", "closed_by", "closed_at", "source_format", "source_topic", "source_partition",
	"source_offset", "created_at", "updated_at", "cluster", "group_id",
}

// ExportFailures calls fn with every failure f selects, oldest first, streaming: one row in
// memory at a time, whatever the count. fn's error stops the export and is returned.
func (s *Store) ExportFailures(ctx context.Context, f Filter, fn func(*TransferRecord) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if err := sqlFilter(&f); err != nil {
		return err
	}
	var args sqlArgs
	conds := conditions(&f, &args)
	cols := make([]string, len(transferColumns)-1)
	for i, c := range transferColumns[:len(transferColumns)-1] {
		cols[i] = "f." + c
	}
	q := "SELECT " + strings.Join(cols, ", ") + `, g.publisher_service, g.message_type, g.error_code, g.stack_trace_hash,
		g.ticket, g.note FROM failures f JOIN failure_groups g ON g.id = f.group_id` + whereClause(conds) +
		" ORDER BY f.created_at, f.id"
	return s.searchQuery(ctx, &f, func(db querier) error {
		rows, err := db.Query(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("export failures: %w", err)
		}
		defer rows.Close()
		var (
			r      TransferRecord
			names  []string
			values [][]byte
		)
		for rows.Next() {
			r = TransferRecord{}
			x := &r.Failure
			if err := rows.Scan(&x.ID, &x.State, &r.StateReason, &x.Temporality, &x.ErrorCode, &x.ErrorMessage,
				&x.ErrorDescription, &x.StackTrace, &x.StackTraceHash, &x.EventID, &x.IdempotenceID, &x.EventCreated,
				&x.PublisherSystem, &x.PublisherService, &x.ProcessID, &x.Topic, &x.Partition, &x.Offset, &x.Key, &x.Value,
				&names, &values, &x.MessageID, &x.MessageIdempotenceID, &x.MessageCreated, &x.MessageSystem,
				&x.MessageService, &x.MessageType, &x.MessageTypeVersion, &x.CausingMessage, &x.Attempt, &x.NextAttemptAt,
				&x.ResendFailures, &x.LastResendError, &x.ResentAt, &x.ClosedReason, &x.ClosedBy, &x.ClosedAt,
				&x.SourceFormat, &x.SourceTopic, &x.SourcePartition, &x.SourceOffset, &x.CreatedAt, &x.UpdatedAt,
				&x.Cluster, &r.Group.PublisherService, &r.Group.MessageType, &r.Group.ErrorCode, &r.Group.StackTraceHash,
				&r.Group.Ticket, &r.Group.Note); err != nil {
				return fmt.Errorf("export failures: %w", err)
			}
			if len(names) != len(values) {
				return fmt.Errorf("export failure %s: %d header names but %d values", x.ID, len(names), len(values))
			}
			x.Headers = make([]avro.Header, len(names))
			for i := range names {
				x.Headers[i] = avro.Header{Name: names[i], Value: values[i]}
			}
			x.ValueNull = x.Value == nil
			if err := fn(&r); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("export failures: %w", err)
		}
		return nil
	})
}

// ImportResult counts an import: the records read, those stored, and those skipped because a
// failure with the same id or idempotence id exists.
type ImportResult struct {
	Read, Inserted, Skipped int64
}

// importBatch is the number of records written to the database at once by an import.
const importBatch = 2000

// ImportFailures stores the records next returns (until it returns nil, nil), in one
// transaction: either all of them are handled or, when next or the database fails, none is.
// A record whose id or idempotence id is already stored is skipped: importing a file twice
// stores it once. Groups are matched by kind (created when missing; their ticket and note are
// set only when the group has none). With dryRun the transaction is rolled back and the result
// says what an import would do. A batch that the database refuses for its data is a
// *BadDataError (records should pass ValidateTransfer first).
func (s *Store) ImportFailures(ctx context.Context, dryRun bool, next func() (*TransferRecord, error)) (ImportResult, error) {
	var res ImportResult
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("import: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE import_failures (LIKE failures INCLUDING DEFAULTS) ON COMMIT DROP`); err != nil {
		return res, fmt.Errorf("import: %w", err)
	}
	var batch []*TransferRecord
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := importRows(ctx, tx, batch)
		if err != nil {
			return err
		}
		res.Inserted += n
		batch = batch[:0]
		return nil
	}
	for {
		r, err := next()
		if err != nil {
			return ImportResult{}, err
		}
		if r == nil {
			break
		}
		res.Read++
		batch = append(batch, r)
		if len(batch) == importBatch {
			if err := flush(); err != nil {
				return ImportResult{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return ImportResult{}, err
	}
	res.Skipped = res.Read - res.Inserted
	if dryRun {
		return res, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return ImportResult{}, fmt.Errorf("import: commit: %w", err)
	}
	return res, nil
}

// importRows writes one batch: groups first (in kind order, the one lock order), then the
// failures through a temporary table, skipping those already stored.
func importRows(ctx context.Context, tx pgx.Tx, batch []*TransferRecord) (int64, error) {
	kinds := map[GroupKind]int64{}
	var order []GroupKind
	for _, r := range batch {
		k := GroupKind{PublisherService: r.Group.PublisherService, MessageType: r.Group.MessageType,
			ErrorCode: r.Group.ErrorCode, StackTraceHash: r.Group.StackTraceHash}
		if _, ok := kinds[k]; !ok {
			kinds[k] = 0
			order = append(order, k)
		}
	}
	slices.SortFunc(order, func(a, b GroupKind) int {
		return strings.Compare(a.PublisherService+"\x00"+a.MessageType+"\x00"+a.ErrorCode+"\x00"+a.StackTraceHash,
			b.PublisherService+"\x00"+b.MessageType+"\x00"+b.ErrorCode+"\x00"+b.StackTraceHash)
	})
	firstOf := map[GroupKind]*TransferRecord{}
	for _, r := range batch {
		k := GroupKind{PublisherService: r.Group.PublisherService, MessageType: r.Group.MessageType, ErrorCode: r.Group.ErrorCode, StackTraceHash: r.Group.StackTraceHash}
		if firstOf[k] == nil {
			firstOf[k] = r
		}
	}
	now := time.Now()
	for _, k := range order {
		g := firstOf[k].Group
		var id int64
		if err := tx.QueryRow(ctx, `
			INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash, ticket, note, first_seen, last_seen)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
			ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET
				ticket = coalesce(failure_groups.ticket, excluded.ticket), note = coalesce(failure_groups.note, excluded.note)
			RETURNING id`, k.PublisherService, k.MessageType, k.ErrorCode, k.StackTraceHash, g.Ticket, g.Note, now).Scan(&id); err != nil {
			return 0, fmt.Errorf("import groups: %w", err)
		}
		kinds[k] = id
	}
	rows := make([][]any, len(batch))
	for i, r := range batch {
		x := &r.Failure
		names := make([]string, len(x.Headers))
		values := make([][]byte, len(x.Headers))
		for j, h := range x.Headers {
			names[j], values[j] = h.Name, h.Value
		}
		k := GroupKind{PublisherService: r.Group.PublisherService, MessageType: r.Group.MessageType, ErrorCode: r.Group.ErrorCode, StackTraceHash: r.Group.StackTraceHash}
		cluster := x.Cluster
		if cluster == "" {
			cluster = DefaultCluster
		}
		value := x.Value
		if x.ValueNull {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		rows[i] = []any{x.ID, x.State, r.StateReason, x.Temporality, x.ErrorCode, x.ErrorMessage, x.ErrorDescription,
			x.StackTrace, x.StackTraceHash, x.EventID, x.IdempotenceID, x.EventCreated, x.PublisherSystem, x.PublisherService,
			x.ProcessID, x.Topic, x.Partition, x.Offset, x.Key, value, names, values, x.MessageID, x.MessageIdempotenceID,
			x.MessageCreated, x.MessageSystem, x.MessageService, x.MessageType, x.MessageTypeVersion, x.CausingMessage,
			x.Attempt, x.NextAttemptAt, x.ResendFailures, x.LastResendError, x.ResentAt, x.ClosedReason, x.ClosedBy,
			x.ClosedAt, string(x.SourceFormat), x.SourceTopic, x.SourcePartition, x.SourceOffset, x.CreatedAt, x.UpdatedAt,
			cluster, kinds[k]}
	}
	if _, err := tx.Exec(ctx, `TRUNCATE import_failures`); err != nil {
		return 0, fmt.Errorf("import: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"import_failures"}, transferColumns, pgx.CopyFromRows(rows)); err != nil {
		var fe *FilterError
		if errors.As(err, &fe) {
			return 0, err
		}
		return 0, classify(fmt.Errorf("import failures: %w", err))
	}
	var n int64
	if err := tx.QueryRow(ctx, importInsertSQL).Scan(&n); err != nil {
		return 0, classify(fmt.Errorf("import failures: %w", err))
	}
	return n, nil
}

// importInsertSQL moves the rows of import_failures into the tables of the layout (migration
// 020), skipping each whose id or idempotence id is stored (or repeats in the batch): the key
// first, so that a failure the intake stores meanwhile under the same idempotence id is
// skipped too. It returns how many it stored.
const importInsertSQL = `
WITH fresh AS (
	SELECT DISTINCT ON (i.idempotence_id) i.*
	FROM (SELECT DISTINCT ON (id) * FROM import_failures ORDER BY id) i
	WHERE NOT EXISTS (SELECT 1 FROM failure_keys k WHERE k.idempotence_id = i.idempotence_id)
	  AND NOT EXISTS (SELECT 1 FROM failure_states s WHERE s.id = i.id)
	ORDER BY i.idempotence_id, i.id
), keys AS (
	INSERT INTO failure_keys (idempotence_id, failure_id, created_at)
	SELECT idempotence_id, id, created_at FROM fresh
	ON CONFLICT DO NOTHING
	RETURNING idempotence_id
), stored AS (
	SELECT f.* FROM fresh f JOIN keys k USING (idempotence_id)
), texts AS (
	INSERT INTO failure_texts (hash, body, last_used)
	SELECT sha256(convert_to(stack_trace, 'UTF8')), min(stack_trace), max(created_at)
	FROM stored WHERE stack_trace IS NOT NULL GROUP BY 1
	ON CONFLICT (hash) DO UPDATE SET last_used = greatest(failure_texts.last_used, EXCLUDED.last_used)
), records AS (
	INSERT INTO failure_records (id, created_at, temporality, error_code, error_message, error_description,
		stack_trace_ref, stack_trace_hash, event_id, idempotence_id, event_created, publisher_system,
		publisher_service, process_id, original_topic, original_partition, original_offset, original_key,
		original_value, header_names, header_values, message_id, message_idempotence_id, message_created,
		message_system, message_service, message_type, message_type_version, causing_message, attempt,
		source_format, source_topic, source_partition, source_offset, cluster)
	SELECT id, created_at, temporality, error_code, error_message, error_description,
		sha256(convert_to(stack_trace, 'UTF8')), stack_trace_hash, event_id, idempotence_id, event_created,
		publisher_system, publisher_service, process_id, original_topic, original_partition, original_offset,
		original_key, original_value, header_names, header_values, message_id, message_idempotence_id,
		message_created, message_system, message_service, message_type, message_type_version, causing_message,
		attempt, source_format, source_topic, source_partition, source_offset, cluster
	FROM stored
), states AS (
	INSERT INTO failure_states (id, created_at, group_id, temporality, original_topic, state, state_reason,
		next_attempt_at, resend_failures, last_resend_error, resent_at, closed_reason, closed_by, closed_at, updated_at)
	SELECT id, created_at, group_id, temporality, original_topic, state, state_reason, next_attempt_at, resend_failures,
		last_resend_error, resent_at, closed_reason, closed_by, closed_at, updated_at
	FROM stored
)
SELECT count(*) FROM keys`
