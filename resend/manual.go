package resend

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// ErrInvalidRequest means a manual resend request cannot be served as asked (no principal, too
// many ids); nothing was resent.
var ErrInvalidRequest = redrive.ErrInvalidRequest

// AuditActionRetry is the audit_log action of a manual resend.
const AuditActionRetry = resendtype.AuditActionRetry

// Outcome is what became of one resend (redrive.Outcome).
type Outcome = redrive.Outcome

// The outcomes of a resend (resendtype).
const (
	OutcomeResent    = redrive.OutcomeResent
	OutcomeNotFound  = redrive.OutcomeNotFound
	OutcomeConflict  = redrive.OutcomeConflict
	OutcomeFailed    = redrive.OutcomeFailed
	OutcomeExhausted = redrive.OutcomeExhausted
)

// ManualRequest says who asks for a manual resend and why (resendtype.ManualRequest).
type ManualRequest = resendtype.ManualRequest

// ItemResult is the outcome of a manual resend for one id (resendtype.ItemResult).
type ItemResult = resendtype.ItemResult

// ManualResult holds one ItemResult per distinct requested id (resendtype.ManualResult).
type ManualResult = resendtype.ManualResult

// Resender resends failures by id on an operator's request: from RETRY_PENDING or PERMANENT,
// rate limited, with an audit log entry per id. It is safe for concurrent use.
type Resender struct {
	s       *Scheduler
	owner   string
	limiter *rate.Limiter

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	stopCtx  context.Context // ends at shutdown: cuts rate limit waits short
	stop     context.CancelFunc
}

// ServiceName returns this service's name as written to the jeap_eh_error_handling_service
// header of resent records.
func (r *Resender) ServiceName() string { return r.s.cfg.ServiceName }

// MaxIDs returns the most ids one ResendIDs call accepts (Config.MaxManualIDs).
func (r *Resender) MaxIDs() int { return r.s.cfg.MaxManualIDs }

// ResendIDs resends the failures with the given ids, each exactly as stored, and returns one
// outcome per distinct id: resent, not_found, conflict (not RETRY_PENDING or PERMANENT, or a
// resend in progress) or failed with the error text. A partial success is never silent: every
// id has its outcome, including those not attempted because ctx ended (failed). It waits for
// the rate limit (Config.ManualRate records/s). Every resend attempted gets an audit log entry
// (action "retry", the principal and reason, the outcome in details); a refused id (not found,
// or in a state that does not allow it) gets none, as for a refused close. It returns an error wrapping
// redrive.ErrInvalidRequest, with nothing done, when the principal is empty or there are more ids than
// MaxIDs, and redrive.ErrClosed once the scheduler's Run has returned.
func (r *Resender) ResendIDs(ctx context.Context, ids []uuid.UUID, req ManualRequest) (ManualResult, error) {
	ids = store.DistinctIDs(ids)
	switch {
	case req.Principal == "":
		return ManualResult{}, fmt.Errorf("%w: a principal is required", redrive.ErrInvalidRequest)
	case len(ids) > r.s.cfg.MaxManualIDs:
		return ManualResult{}, fmt.Errorf("%w: %d ids, at most %d per request", ErrInvalidRequest, len(ids), r.s.cfg.MaxManualIDs)
	case req.TargetCluster != "" && !r.s.pub.known(req.TargetCluster):
		return ManualResult{}, fmt.Errorf("%w: target cluster %q is not configured", ErrInvalidRequest, req.TargetCluster)
	}
	items := make([]ItemResult, len(ids))
	for i, id := range ids {
		items[i] = ItemResult{ID: id}
	}
	if !r.enter() {
		for i := range items {
			items[i].Outcome, items[i].Error = redrive.OutcomeFailed, redrive.ErrClosed.Error()
		}
		return summarize(items), redrive.ErrClosed
	}
	defer r.inflight.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.stopCtx, cancel)()

	chunk := max(1, min(r.limiter.Burst(), r.s.cfg.BatchSize))
	for start := 0; start < len(items); start += chunk {
		part := items[start:min(start+chunk, len(items))]
		if err := r.limiter.WaitN(ctx, len(part)); err != nil {
			for i := start; i < len(items); i++ {
				items[i].Outcome, items[i].Error = redrive.OutcomeFailed, "not attempted: rate limit: "+err.Error()
			}
			r.auditOnly(items[start:], req, TriggerManual)
			break
		}
		var edit func(*store.ResendItem)
		if req.TargetTopic != "" || req.TargetCluster != "" || len(req.Headers) > 0 {
			edit = func(it *store.ResendItem) {
				if req.TargetCluster != "" && req.TargetCluster != it.Destination() {
					it.TargetCluster, it.Partition = req.TargetCluster, store.UnknownPosition
				}
				if req.TargetTopic != "" && it.Topic != req.TargetTopic {
					it.Topic, it.Partition = req.TargetTopic, redrive.UnknownPosition
				}
				if len(req.Headers) > 0 {
					it.Headers = append(slices.Clip(it.Headers), req.Headers...)
				}
			}
		}
		r.resendChunk(ctx, part, req, edit, TriggerManual)
	}
	for _, it := range items {
		r.s.metrics.resends.WithLabelValues(TriggerManual, string(it.Outcome)).Inc()
	}
	return summarize(items), nil
}

// resendChunk claims, sends and records part, filling in each outcome. edit, when not nil,
// changes each claimed item before it is sent (a repair's revision). trigger (TriggerManual or
// TriggerAuto) goes to the audit entries and the acknowledgement metric.
func (r *Resender) resendChunk(ctx context.Context, part []ItemResult, req ManualRequest, edit func(*store.ResendItem), trigger string) {
	ids := make([]uuid.UUID, len(part))
	for i := range part {
		ids[i] = part[i].ID
	}
	now := r.s.cfg.Now()
	claim, refused, err := r.s.store.ClaimResends(ctx, store.ClaimResendsParams{Owner: r.owner, IDs: ids, Now: now, LeaseUntil: now.Add(r.s.cfg.Lease)})
	if err != nil {
		r.s.cfg.Logger.Error("manual resend: claim failed", "error", err, "principal", req.Principal, "ids", len(ids))
		for i := range part {
			part[i].Outcome, part[i].Error = redrive.OutcomeFailed, "not attempted: the failure could not be claimed (database error)"
		}
		r.auditOnly(part, req, trigger)
		return
	}
	index := make(map[uuid.UUID]*ItemResult, len(part))
	for i := range part {
		index[part[i].ID] = &part[i]
	}
	for _, it := range claim.Items {
		res := index[it.ID]
		// Until the send settles it: an outcome that could not be recorded is a failure.
		res.Outcome, res.State, res.Error = redrive.OutcomeFailed, it.State, "outcome unknown"
	}
	for i := range part {
		if part[i].Outcome != "" {
			continue
		}
		if ref, ok := refused[part[i].ID]; ok {
			part[i].Outcome, part[i].State = redrive.OutcomeConflict, ref.State
			if ref.InProgress {
				part[i].Error = "a resend of this failure is in progress"
			} else {
				part[i].Error = (&redrive.TransitionError{ID: part[i].ID, From: ref.State, Action: "resend"}).Error()
			}
		} else {
			part[i].Outcome, part[i].Error = redrive.OutcomeNotFound, "no failure has this id"
		}
	}
	if edit != nil {
		for i := range claim.Items {
			edit(&claim.Items[i])
		}
	}
	// The claimed rows are held for this resender: finish even when ctx ends.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.s.cfg.batchTimeout())
	defer cancel()
	settle := func(out []delivered) {
		for _, d := range out {
			res := index[d.Item.ID]
			res.Outcome, res.Error = d.Outcome, d.Err
		}
	}
	out, err := r.s.deliver(bctx, r.owner, trigger, claim, func(out []delivered) []redrive.AuditEntry {
		settle(out)
		return auditEntries(part, req, r.s.cfg.ServiceName, trigger)
	})
	settle(out)
	if err != nil {
		r.s.cfg.Logger.Error("manual resend: recording outcomes failed", "error", err, "principal", req.Principal)
	}
}

// auditOnly writes the audit entries of items that were not sent.
func (r *Resender) auditOnly(items []ItemResult, req ManualRequest, trigger string) {
	if len(items) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	err := r.s.store.AppendAudit(ctx, auditEntries(items, req, r.s.cfg.ServiceName, trigger), r.s.cfg.Now())
	if err != nil {
		r.s.cfg.Logger.Error("manual resend: audit log write failed", "error", err, "principal", req.Principal, "ids", len(items))
	}
}

func auditEntries(items []ItemResult, req ManualRequest, service, trigger string) []redrive.AuditEntry {
	var reason *string
	if req.Reason != "" {
		reason = &req.Reason
	}
	entries := make([]redrive.AuditEntry, 0, len(items))
	for _, it := range items {
		if it.Outcome == redrive.OutcomeNotFound || it.Outcome == redrive.OutcomeConflict {
			// Refused, nothing happened to the failure: as for a refused close, no entry.
			continue
		}
		details := map[string]any{}
		for k, v := range req.Details {
			details[k] = v
		}
		details["outcome"], details["trigger"], details["resending_service"] = string(it.Outcome), trigger, service
		if req.TargetTopic != "" {
			details["target_topic"] = req.TargetTopic
		}
		if req.TargetCluster != "" {
			details["target_cluster"] = req.TargetCluster
		}
		if it.State != "" {
			details["from_state"] = string(it.State)
		}
		if it.Error != "" {
			details["error"] = it.Error
		}
		entries = append(entries, redrive.AuditEntry{FailureID: &it.ID, Action: AuditActionRetry, Principal: req.Principal, Reason: reason, Details: details})
	}
	return entries
}

// enter registers a manual resend in flight, or reports false once the resender is closed.
func (r *Resender) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.inflight.Add(1)
	return true
}

// shutdown refuses new manual resends, ends their rate limit waits (the ids not attempted are
// reported failed) and waits for the batches in flight.
func (r *Resender) shutdown() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.inflight.Wait()
}

func summarize(items []ItemResult) ManualResult {
	res := ManualResult{Items: items}
	for _, it := range items {
		switch it.Outcome {
		case redrive.OutcomeResent:
			res.Resent++
		case redrive.OutcomeNotFound:
			res.NotFound++
		case redrive.OutcomeConflict:
			res.Conflict++
		default:
			res.Failed++
		}
	}
	return res
}

// HeaderRevision names, on a resent record, the revision it carries (resendtype.HeaderRevision).
const HeaderRevision = resendtype.HeaderRevision

// Revision is what a repair sends instead of the stored original (resendtype.Revision).
type Revision = resendtype.Revision

// ResendRevision resends the failure with id as rev says instead of as stored, like ResendIDs
// does for one id (claim, rate limit, RESENT on the broker's acknowledgement, an audit entry
// with the revision). The stored original is not changed.
func (r *Resender) ResendRevision(ctx context.Context, id uuid.UUID, rev Revision, req ManualRequest) (ItemResult, error) {
	if req.Principal == "" {
		return ItemResult{}, fmt.Errorf("%w: a principal is required", redrive.ErrInvalidRequest)
	}
	part := []ItemResult{{ID: id}}
	if !r.enter() {
		return ItemResult{ID: id, Outcome: redrive.OutcomeFailed, Error: redrive.ErrClosed.Error()}, redrive.ErrClosed
	}
	defer r.inflight.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.stopCtx, cancel)()
	if err := r.limiter.WaitN(ctx, 1); err != nil {
		return ItemResult{ID: id, Outcome: redrive.OutcomeFailed, Error: "not attempted: rate limit: " + err.Error()}, nil
	}
	details := map[string]any{"revision": rev.ID, "target_topic": rev.Topic}
	for k, v := range req.Details {
		details[k] = v
	}
	req.Details = details
	r.resendChunk(ctx, part, req, func(it *store.ResendItem) {
		if rev.Topic != it.Topic {
			it.Partition = redrive.UnknownPosition // another topic: partition by key
		}
		it.Topic, it.Key, it.Value = rev.Topic, rev.Key, rev.Value
		it.Headers = append(append([]avro.Header(nil), rev.Headers...),
			avro.Header{Name: HeaderRevision, Value: []byte(strconv.FormatInt(rev.ID, 10))})
	}, TriggerManual)
	r.s.metrics.resends.WithLabelValues(TriggerManual, string(part[0].Outcome)).Inc()
	return part[0], nil
}
