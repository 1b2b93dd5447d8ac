package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// AppendAudit appends entries to the audit log; an entry with a zero At gets at. Changes that
// are audited write their entries in their own transaction (CloseFailures, UpdateGroup,
// MarkResent); AppendAudit is for requests that changed nothing, such as a manual resend of
// failures that could not be resent.
func (s *Store) AppendAudit(ctx context.Context, entries []AuditEntry, at time.Time) error {
	if len(entries) == 0 {
		return nil
	}
	entries = slices.Clone(entries)
	for i := range entries {
		if entries[i].At.IsZero() {
			entries[i].At = at
		}
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return writeAudit(ctx, tx, entries) })
}

// entryJob is the job an audit entry belongs to: the job id in its details, which every entry
// of a job carries (its own, its batches', the resends that follow its heads' chains); nil for
// other entries. It fills the audit log's job_id column.
func entryJob(e *AuditEntry) *uuid.UUID {
	s, ok := e.Details["job_id"].(string)
	if !ok {
		return nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return nil
	}
	return &id
}

// writeAudit is the one writer of the audit log: operator actions, group edits and manual
// resends all append their entries with it, in the transaction of the change they record.
// It appends entries in one statement; an entry with a zero At gets the time of the
// statement.
func writeAudit(ctx context.Context, tx pgx.Tx, entries []AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	n := len(entries)
	var (
		failureIDs = make([]*uuid.UUID, n)
		groupIDs   = make([]*int64, n)
		actions    = make([]string, n)
		principals = make([]string, n)
		reasons    = make([]*string, n)
		details    = make([]*string, n)
		ats        = make([]*time.Time, n)
		jobIDs     = make([]*uuid.UUID, n)
	)
	for i := range entries {
		e := &entries[i]
		failureIDs[i], groupIDs[i], actions[i], principals[i], reasons[i] = e.FailureID, e.GroupID, e.Action, e.Principal, e.Reason
		if e.Details != nil {
			b, err := json.Marshal(e.Details)
			if err != nil {
				return fmt.Errorf("audit details: %w", err)
			}
			d := string(b)
			details[i] = &d
		}
		if !e.At.IsZero() {
			ats[i] = &e.At
		}
		jobIDs[i] = entryJob(e)
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO audit_log (failure_id, group_id, action, principal, reason, details, at, job_id)
		SELECT u.failure_id, u.group_id, u.action, u.principal, u.reason, u.details::jsonb, coalesce(u.at, now()), u.job_id
		FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::uuid[])
			AS u(failure_id, group_id, action, principal, reason, details, at, job_id)`,
		nullableUUIDArray(failureIDs), groupIDs, actions, principals, reasons, details, ats, nullableUUIDArray(jobIDs))
	if err != nil {
		return fmt.Errorf("write audit: %w", err)
	}
	return nil
}
