package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The records and states of failures are partitioned by created_at (migration 020): one pair of
// partitions (failure_records_pYYYYMMDD, failure_states_pYYYYMMDD) per period, created ahead by
// EnsurePartitions, and a pair of default partitions for the rows of no period (rows older than
// the first period at the upgrade, failures carried forward by DropExpiredPartitions, a clock
// far off). Retention drops a whole period at once (DropExpiredPartitions); only the default
// partitions are ever cleaned row by row (DeleteExpired).
//
// The audit log and the job items have partitions of the same periods (audit_log_pYYYYMMDD by
// at, job_items_pYYYYMMDD by their job's created_at; migration 023), created with the failure
// tables' by EnsurePartitions and dropped, once older than the audit age, by
// DropExpiredLogPartitions.

// Partition is one period of the failure tables: [From, To).
type Partition struct {
	// Name is the suffix of the period's tables, e.g. p20261126.
	Name string
	From time.Time
	To   time.Time
}

// Partitions returns the periods attached to failure_records, oldest first (the default
// partition is not one).
func (s *Store) Partitions(ctx context.Context) ([]Partition, error) {
	return s.periods(ctx, "failure_records")
}

// LogPartitions returns the periods attached to audit_log (and job_items), oldest first.
func (s *Store) LogPartitions(ctx context.Context) ([]Partition, error) {
	return s.periods(ctx, "audit_log")
}

func (s *Store) periods(ctx context.Context, parent string) ([]Partition, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT substr(c.relname, length($1) + 2), b[1]::timestamptz, b[2]::timestamptz
		FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\) TO \(''([^'']+)''\)') AS b
		WHERE i.inhparent = $1::regclass AND b IS NOT NULL
		ORDER BY 2`, parent)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		err := r.Scan(&p.Name, &p.From, &p.To)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	return parts, nil
}

// EnsurePartitionsParams are the parameters of EnsurePartitions.
type EnsurePartitionsParams struct {
	// Now is the current time.
	Now time.Time
	// Width is the length of a period, a whole number of days (periods start at multiples of
	// Width after the Unix epoch, in UTC).
	Width time.Duration
	// Ahead is how far past Now the periods must reach.
	Ahead time.Duration
}

// EnsureResult says what EnsurePartitions did.
type EnsureResult struct {
	// Created are the periods created.
	Created []Partition
	// Skipped are the periods that could not be created because rows of their range sit in
	// the default partition already (their failures stay there).
	Skipped []Partition
	// LogCreated and LogSkipped are the same for the audit log and the job items.
	LogCreated, LogSkipped []Partition
}

// ErrBadPartitionWidth means a partition width is not a positive whole number of days.
var ErrBadPartitionWidth = errors.New("partition width must be a positive whole number of days")

// EnsurePartitions creates the periods from the one that holds p.Now (or from the end of the
// newest period, when that is later) until p.Now + p.Ahead is covered. Each period's two tables
// are created in one statement (redrive_create_partitions); a period that exists is left alone.
// Creating a partition takes a short ACCESS EXCLUSIVE lock on the parent tables.
func (s *Store) EnsurePartitions(ctx context.Context, p EnsurePartitionsParams) (EnsureResult, error) {
	if p.Width <= 0 || p.Width%(24*time.Hour) != 0 {
		return EnsureResult{}, fmt.Errorf("ensure partitions: %w (got %s)", ErrBadPartitionWidth, p.Width)
	}
	var res EnsureResult
	for _, f := range []struct {
		parent, create   string
		created, skipped *[]Partition
	}{
		{"failure_records", "redrive_create_partitions", &res.Created, &res.Skipped},
		{"audit_log", "redrive_create_log_partitions", &res.LogCreated, &res.LogSkipped},
	} {
		parts, err := s.periods(ctx, f.parent)
		if err != nil {
			return res, err
		}
		width := int64(p.Width / time.Second)
		start := time.Unix(p.Now.Unix()/width*width, 0).UTC()
		if n := len(parts); n > 0 && parts[n-1].To.After(start) {
			start = parts[n-1].To
		}
		end := p.Now.Add(p.Ahead)
		for lo := start; !lo.After(end); lo = lo.Add(p.Width) {
			hi := lo.Add(p.Width)
			var ok bool
			if err := s.pool.QueryRow(ctx, `SELECT `+f.create+`($1, $2)`, lo, hi).Scan(&ok); err != nil {
				return res, fmt.Errorf("create partitions of %s from %s: %w", f.parent, lo.Format(time.DateOnly), err)
			}
			part := Partition{Name: "p" + lo.Format("20060102"), From: lo, To: hi}
			if ok {
				*f.created = append(*f.created, part)
			} else {
				*f.skipped = append(*f.skipped, part)
			}
		}
	}
	return res, nil
}

// LogRetentionParams are the parameters of DropExpiredLogPartitions.
type LogRetentionParams struct {
	// Now is the current time.
	Now time.Time
	// Age is the age at which audit entries and the items of finished jobs expire: a period
	// whose whole range is older is dropped. It must be positive.
	Age time.Duration
	// Limit bounds the rows of the default partitions deleted in one run. Defaults to 10000.
	Limit int
	// LockTimeout bounds the wait for the locks that dropping a partition takes. Defaults to
	// 5s; a period that cannot be locked in time is left for the next run.
	LockTimeout time.Duration
}

// DroppedLogPeriod says what DropExpiredLogPartitions did with one period.
type DroppedLogPeriod struct {
	Partition
	// Entries and Items count the audit entries and job items dropped; Jobs the finished jobs
	// of the period deleted with their items.
	Entries, Items, Jobs int64
	// Waiting is set when the period was kept because a job created in it is not finished
	// (PREVIEW, RUNNING or PAUSED): its items stay until it is.
	Waiting bool
}

// LogRetention is what DropExpiredLogPartitions did.
type LogRetention struct {
	Periods []DroppedLogPeriod
	// DefaultEntries counts the expired audit entries deleted from the default partition;
	// DefaultJobs the finished jobs deleted whose items were there.
	DefaultEntries, DefaultJobs int64
}

// DropExpiredLogPartitions drops the periods of the audit log and the job items whose whole
// range is older than p.Age, oldest first, with the finished (DONE or CANCELED) jobs created in
// them: nothing about a job that is not finished is lost, since a period where one was created
// waits (DroppedLogPeriod.Waiting). It then deletes, up to p.Limit each, the expired entries of
// the audit log's default partition and the finished expired jobs whose items are in the job
// items' default partition. Each period goes in one transaction, which holds ACCESS EXCLUSIVE
// locks on audit_log and job_items for the drops only.
func (s *Store) DropExpiredLogPartitions(ctx context.Context, p LogRetentionParams) (LogRetention, error) {
	var res LogRetention
	if p.Age <= 0 {
		return res, errors.New("drop expired log partitions: the age must be positive")
	}
	if p.LockTimeout <= 0 {
		p.LockTimeout = 5 * time.Second
	}
	if p.Limit <= 0 {
		p.Limit = 10000
	}
	cutoff := p.Now.Add(-p.Age)
	parts, err := s.LogPartitions(ctx)
	if err != nil {
		return res, err
	}
	for _, part := range parts {
		if part.To.After(cutoff) {
			break
		}
		d := DroppedLogPeriod{Partition: part}
		audit := pgx.Identifier{"audit_log_" + part.Name}.Sanitize()
		items := pgx.Identifier{"job_items_" + part.Name}.Sanitize()
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", p.LockTimeout.Milliseconds())); err != nil {
				return err
			}
			// The jobs' rows first: an operator's change of one of them meanwhile waits.
			rows, err := tx.Query(ctx, `SELECT state FROM jobs WHERE created_at >= $1 AND created_at < $2 FOR UPDATE`, part.From, part.To)
			if err != nil {
				return fmt.Errorf("jobs of %s: %w", part.Name, err)
			}
			states, err := pgx.CollectRows(rows, pgx.RowTo[JobState])
			if err != nil {
				return fmt.Errorf("jobs of %s: %w", part.Name, err)
			}
			for _, st := range states {
				d.Waiting = d.Waiting || (st != JobDone && st != JobCanceled)
			}
			if d.Waiting {
				return nil
			}
			if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+audit+`), (SELECT count(*) FROM `+items+`)`).
				Scan(&d.Entries, &d.Items); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `LOCK TABLE audit_log, job_items IN ACCESS EXCLUSIVE MODE`); err != nil {
				return fmt.Errorf("lock the log tables: %w", err)
			}
			if _, err := tx.Exec(ctx, `DROP TABLE `+audit+`, `+items); err != nil {
				return fmt.Errorf("drop %s: %w", part.Name, err)
			}
			ct, err := tx.Exec(ctx, `DELETE FROM jobs WHERE created_at >= $1 AND created_at < $2`, part.From, part.To)
			d.Jobs = ct.RowsAffected()
			return err
		})
		if err != nil {
			return res, fmt.Errorf("drop expired log partition %s: %w", part.Name, err)
		}
		res.Periods = append(res.Periods, d)
	}
	ct, err := s.pool.Exec(ctx, `DELETE FROM audit_log_default WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM audit_log_default WHERE at < $1 LIMIT $2))`, cutoff, p.Limit)
	if err != nil {
		return res, fmt.Errorf("delete expired audit entries: %w", err)
	}
	res.DefaultEntries = ct.RowsAffected()
	ct, err = s.pool.Exec(ctx, `DELETE FROM jobs WHERE id IN (
		SELECT j.id FROM jobs j WHERE j.created_at < $1 AND j.state IN ('DONE', 'CANCELED')
			AND EXISTS (SELECT 1 FROM job_items_default i WHERE i.job_id = j.id)
		LIMIT $2)`, cutoff, p.Limit)
	if err != nil {
		return res, fmt.Errorf("delete expired jobs: %w", err)
	}
	res.DefaultJobs = ct.RowsAffected()
	return res, nil
}

// RetentionParams are the ages after which failures expire, by state (see DeleteExpired).
type RetentionParams struct {
	// Now is the current time.
	Now time.Time
	// ResolvedAge is the age of a RESENT or CLOSED failure (from resent_at or closed_at) at
	// which it expires.
	ResolvedAge time.Duration
	// PermanentAge is the age of a PERMANENT failure (from its last change) at which it
	// expires. RETRY_PENDING failures never expire.
	PermanentAge time.Duration
	// MaxCarry is the most failures that are carried forward from one partition: a period
	// whose range is older than ResolvedAge but that holds more failures not yet expired waits
	// until its range is older than PermanentAge too. Zero means no limit.
	MaxCarry int64
	// LockTimeout bounds the wait for the locks that detaching a partition takes. Defaults to
	// 5s; a partition that cannot be locked in time is left for the next run.
	LockTimeout time.Duration
}

// DroppedPartition says what retention did with one period.
type DroppedPartition struct {
	Partition
	// Dropped counts its failures that expired: they are gone.
	Dropped int64
	// Carried counts its failures that had not expired (open, or resolved too recently): they
	// were moved, unchanged, to the default partition.
	Carried int64
	// Groups counts the groups deleted because they were left empty.
	Groups int64
	// Locked is how long the parent tables were held exclusively.
	Locked time.Duration
}

// survivorSQL is true for a state row (alias s) that has not expired with the resolved cutoff
// $1 and the permanent cutoff $2.
const survivorSQL = `(s.state = 'RETRY_PENDING'
	OR (s.state = 'PERMANENT' AND s.updated_at >= $2)
	OR (s.state = 'RESENT' AND coalesce(s.resent_at, s.updated_at) >= $1)
	OR (s.state = 'CLOSED' AND coalesce(s.closed_at, s.updated_at) >= $1))`

// DropExpiredPartitions drops the periods whose whole range is older than the shorter of the
// two ages, oldest first. Nothing that has not expired is lost: in the transaction that
// detaches a period's two tables, its failures that have not expired (every RETRY_PENDING one,
// PERMANENT ones changed after the permanent cutoff, RESENT and CLOSED ones resolved after the
// resolved cutoff) are inserted again into failure_records and failure_states, where they land
// in the default partitions with their id, created_at, record and state unchanged; then the
// keys, revisions and (left empty) groups of the others are deleted and the tables dropped. A
// period with more than p.MaxCarry such failures waits until its range is older than both
// ages. The audit log is kept.
//
// Detaching takes an ACCESS EXCLUSIVE lock on failure_records and failure_states until the
// survivors are carried: every statement on failures waits for it (DroppedPartition.Locked).
// The keys, revisions and groups are deleted afterwards, from the detached tables, which are
// then dropped; a run that stopped in between is finished by the next one (its period is
// reported with a zero From). Until then, a failure of the period that arrives again is
// refused by its key (the intake retries the batch).
func (s *Store) DropExpiredPartitions(ctx context.Context, p RetentionParams) ([]DroppedPartition, error) {
	if p.LockTimeout <= 0 {
		p.LockTimeout = 5 * time.Second
	}
	minAge, maxAge := min(p.ResolvedAge, p.PermanentAge), max(p.ResolvedAge, p.PermanentAge)
	if minAge <= 0 {
		return nil, errors.New("drop expired partitions: the ages must be positive")
	}
	var out []DroppedPartition
	left, err := s.detachedPeriods(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range left {
		dropped, groups, err := s.finishDetached(ctx, name, p.Now)
		if err != nil {
			return out, err
		}
		out = append(out, DroppedPartition{Partition: Partition{Name: name}, Dropped: dropped, Groups: groups})
	}
	parts, err := s.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	resolvedCut, permanentCut := p.Now.Add(-p.ResolvedAge), p.Now.Add(-p.PermanentAge)
	for _, part := range parts {
		if part.To.After(p.Now.Add(-minAge)) {
			break
		}
		if p.MaxCarry > 0 && part.To.After(p.Now.Add(-maxAge)) {
			var carry int64
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{"failure_states_" + part.Name}.Sanitize()+
				` s WHERE `+survivorSQL, resolvedCut, permanentCut).Scan(&carry); err != nil {
				return out, fmt.Errorf("count failures to carry from %s: %w", part.Name, err)
			}
			if carry > p.MaxCarry {
				continue
			}
		}
		d, err := s.dropPartition(ctx, part, p, resolvedCut, permanentCut)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (s *Store) dropPartition(ctx context.Context, part Partition, p RetentionParams, resolvedCut, permanentCut time.Time) (DroppedPartition, error) {
	d := DroppedPartition{Partition: part}
	rec := pgx.Identifier{"failure_records_" + part.Name}.Sanitize()
	st := pgx.Identifier{"failure_states_" + part.Name}.Sanitize()
	// The locked transaction only detaches the period and carries its survivors forward, so
	// that every failure is visible in exactly one place at any time; the rest of the work
	// reads the detached tables without holding the parents (finishDetached).
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", p.LockTimeout.Milliseconds())); err != nil {
			return err
		}
		start := time.Now()
		defer func() { d.Locked = time.Since(start) }()
		// Records first, in the order the intake (a record, then its state) and the queries on
		// the failures view take their locks.
		if _, err := tx.Exec(ctx, `LOCK TABLE failure_records, failure_states IN ACCESS EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("lock the failure tables: %w", err)
		}
		if _, err := tx.Exec(ctx, `ALTER TABLE failure_records DETACH PARTITION `+rec); err != nil {
			return fmt.Errorf("detach %s: %w", rec, err)
		}
		if _, err := tx.Exec(ctx, `ALTER TABLE failure_states DETACH PARTITION `+st); err != nil {
			return fmt.Errorf("detach %s: %w", st, err)
		}
		// Within one period an id names one failure: the detached tables join on it alone (a
		// join on id and created_at would be estimated at one row).
		// A detach fires no trigger: the period's rows of failure_not_resent go here, and the
		// insert of the survivors' states writes theirs again (migration 026). Only this
		// period's failures have a created_at in its range.
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM failure_not_resent WHERE created_at >= $1 AND created_at < $2`, part.From, part.To)
		b.Queue(`INSERT INTO failure_records SELECT r.* FROM `+rec+` r JOIN `+st+` s ON s.id = r.id WHERE `+survivorSQL,
			resolvedCut, permanentCut)
		b.Queue(`INSERT INTO failure_states SELECT s.* FROM `+st+` s WHERE `+survivorSQL, resolvedCut, permanentCut)
		br := tx.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			var ct pgconn.CommandTag
			ct, err = br.Exec()
			d.Carried = ct.RowsAffected()
			if err == nil {
				_, err = br.Exec()
			}
		}
		if err != nil {
			_ = br.Close()
			return fmt.Errorf("carry failures forward from %s: %w", part.Name, err)
		}
		return br.Close()
	})
	if err != nil {
		return DroppedPartition{}, fmt.Errorf("drop expired partition %s: %w", part.Name, err)
	}
	dropped, groups, err := s.finishDetached(ctx, part.Name, p.Now)
	d.Dropped, d.Groups = dropped, groups
	return d, err
}

// finishDetached finishes the retention of the detached period name: it deletes the keys and
// revisions of its failures that were not carried into the default partition, marks the
// stack traces of the carried ones used at now, drops the two tables and deletes the groups
// this left empty. It returns how many failures went and how many groups. A run that stopped
// after the detach is finished by the next one (DropExpiredPartitions).
func (s *Store) finishDetached(ctx context.Context, name string, now time.Time) (dropped, groups int64, err error) {
	rec := pgx.Identifier{"failure_records_" + name}.Sanitize()
	st := pgx.Identifier{"failure_states_" + name}.Sanitize()
	const carried = `EXISTS (SELECT 1 FROM failure_states_default c WHERE c.id = s.id AND c.created_at = s.created_at)`
	var groupIDs []int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM failure_keys k USING ` + rec + ` s
			WHERE k.idempotence_id = s.idempotence_id AND k.failure_id = s.id AND NOT ` + carried)
		b.Queue(`DELETE FROM failure_revisions v USING ` + st + ` s WHERE v.failure_id = s.id AND NOT ` + carried)
		b.Queue(`UPDATE failure_texts t SET last_used = $1 FROM (SELECT DISTINCT s.stack_trace_ref FROM `+rec+` s
			WHERE s.stack_trace_ref IS NOT NULL AND `+carried+`) c WHERE t.hash = c.stack_trace_ref AND t.last_used < $1`, now)
		b.Queue(`SELECT DISTINCT s.group_id FROM ` + st + ` s WHERE NOT ` + carried)
		br := tx.SendBatch(ctx, b)
		for i, step := range []string{"delete keys", "delete revisions", "touch carried texts"} {
			ct, err := br.Exec()
			if err != nil {
				_ = br.Close()
				return fmt.Errorf("%s of %s: %w", step, name, err)
			}
			if i == 0 {
				dropped = ct.RowsAffected()
			}
		}
		rows, err := br.Query()
		if err == nil {
			groupIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		if err != nil {
			_ = br.Close()
			return fmt.Errorf("groups of %s: %w", name, err)
		}
		if err := br.Close(); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DROP TABLE `+rec+`, `+st)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("finish dropping partition %s: %w", name, err)
	}
	groups, err = s.deleteEmptyGroups(ctx, groupIDs)
	return dropped, groups, err
}

// detachedPeriods returns the names of the periods whose tables were detached but not dropped
// (a retention that stopped half-way).
func (s *Store) detachedPeriods(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT substr(r.relname, length('failure_records_') + 1) FROM pg_class r
		JOIN pg_class st ON st.relname = 'failure_states_' || substr(r.relname, length('failure_records_') + 1)
		WHERE r.relname ~ '^failure_records_p[0-9]{8}$' AND r.relkind = 'r' AND NOT r.relispartition
		  AND st.relkind = 'r' AND NOT st.relispartition
		  AND r.relnamespace = 'public'::regnamespace AND st.relnamespace = 'public'::regnamespace`)
	if err != nil {
		return nil, fmt.Errorf("detached partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("detached partitions: %w", err)
	}
	return names, nil
}

// DeleteUnusedTexts deletes the stack traces that no stored failure can reference: those
// last used more than a day before the oldest period (or before cutoff, when there is no
// period) that no failure of the default partition references. It returns how many it
// deleted.
func (s *Store) DeleteUnusedTexts(ctx context.Context, cutoff time.Time) (int64, error) {
	parts, err := s.Partitions(ctx)
	if err != nil {
		return 0, err
	}
	if len(parts) > 0 && parts[0].From.Before(cutoff) {
		cutoff = parts[0].From
	}
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM failure_texts t
		WHERE t.last_used < $1::timestamptz - interval '1 day'
		  AND t.hash NOT IN (SELECT r.stack_trace_ref FROM failure_records_default r WHERE r.stack_trace_ref IS NOT NULL)`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("delete unused texts: %w", err)
	}
	return tag.RowsAffected(), nil
}
