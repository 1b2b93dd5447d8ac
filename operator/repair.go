package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/resend/resendtype"
)

// MaxRepairBytes bounds an edited value or key.
const MaxRepairBytes = 4 << 20

// Value formats of a repair.
const (
	// EditBytes: the value is given as bytes (an upload, or base64), taken as they are.
	EditBytes = "bytes"
	// EditText: the value is UTF-8 text.
	EditText = "text"
	// EditJSON: the value is a JSON document; it must parse.
	EditJSON = "json"
	// EditAvro: the value is the datum in Avro's JSON encoding, encoded with the writer schema
	// and framing of the original value.
	EditAvro = "avro"
	// EditProtobuf: the value is the message as protojson, encoded with the writer schema and
	// framing (schema id, message indexes) of the original value.
	EditProtobuf = "protobuf"
	// EditJSONSchema: the value is the JSON document, checked against the writer schema and
	// framed with the original value's schema id.
	EditJSONSchema = "jsonschema"
)

// RepairRequest is an operator's edit of a failure's record, to resend in place of the
// original. A nil field keeps the original's.
type RepairRequest struct {
	ID        uuid.UUID
	Principal string
	// Reason says why; required.
	Reason string
	// Value is the edited value in ValueFormat (EditBytes, EditText, EditJSON, EditAvro,
	// EditProtobuf or EditJSONSchema); nil keeps the original value.
	Value       []byte
	ValueFormat string
	// Headers replace the original headers (in order) when not nil.
	Headers []avro.Header
	// TargetTopic is where to send it; "" is the original topic. Another topic must be in
	// Config.RepairTopics.
	TargetTopic string
	// Payload is the asker's payload permission: the answer's revision is shown as Revisions
	// shows it to such a reader (no bytes without it; masked by the failure's topic with it).
	Payload bool
}

// RepairResult is a stored revision, as the asker may see it (Revisions), and the outcome of
// its resend.
type RepairResult struct {
	Revision *redrive.Revision
	Outcome  ItemOutcome
}

// Repair stores an edit of a failure's record as a revision (who, when, why; the original is
// not changed) and resends it instead of the original, with a header naming the revision. The
// edit is checked first, and nothing is stored when it is refused: an *InputError says why (a
// JSON edit that does not parse, an Avro, Protobuf or JSON Schema edit that does not fit the
// writer schema (naming the field), a value
// over MaxRepairBytes, a topic outside the allow-list, a value or header value that still holds
// the masked view's placeholders). Only failures an operator may retry
// (RETRY_PENDING or PERMANENT) are repaired; others wrap redrive.ErrConflict.
func (c *Core) Repair(ctx context.Context, req RepairRequest) (*RepairResult, error) {
	reason, err := CheckText("reason", req.Reason, MaxReasonLen)
	if err != nil {
		return nil, err
	}
	if reason == "" {
		return nil, invalid("reason", "required: say what the repair fixes")
	}
	if c.cfg.Resender == nil {
		return nil, fmt.Errorf("%w: resending is not configured on this server", redrive.ErrUnavailable)
	}
	qctx, cancel := c.queryContext(ctx)
	d, err := c.store.FailureByID(qctx, req.ID)
	cancel()
	if err != nil {
		return nil, fromStore(err)
	}
	if !d.State.Resendable() {
		return nil, fmt.Errorf("%w: %s", redrive.ErrConflict, (&redrive.TransitionError{ID: d.ID, From: d.State, Action: "repair"}).Error())
	}
	rev := &redrive.Revision{FailureID: d.ID, Principal: req.Principal, Reason: reason, TargetTopic: d.Topic,
		Key: d.Key, Value: d.Value, Headers: d.Headers, CreatedAt: c.cfg.Now()}
	if d.ValueNull {
		rev.Value = nil
	}
	if req.TargetTopic != "" && req.TargetTopic != d.Topic {
		if !slices.Contains(c.cfg.RepairTopics, req.TargetTopic) {
			return nil, invalid("target_topic", "%q is not among the topics a repair may send to (%s)", req.TargetTopic,
				strings.Join(append([]string{"the original topic"}, c.cfg.RepairTopics...), ", "))
		}
		rev.TargetTopic = req.TargetTopic
	}
	if req.Value != nil {
		if rev.Value, err = c.editedValue(d, req); err != nil {
			return nil, err
		}
	}
	if req.Headers != nil {
		for i, h := range req.Headers {
			if h.Name == "" || !utf8.ValidString(h.Name) {
				return nil, invalid(fmt.Sprintf("headers[%d].name", i), "a header needs a name in UTF-8")
			}
			if len(h.Value) > MaxRepairBytes {
				return nil, invalid(fmt.Sprintf("headers[%d].value", i), "%d bytes, at most %d", len(h.Value), MaxRepairBytes)
			}
		}
		rev.Headers = req.Headers
	}
	if err := c.refusePlaceholders(d, req); err != nil {
		return nil, err
	}
	actx, acancel := c.actionContext(ctx)
	defer acancel()
	if err := c.store.CreateRevision(actx, rev); err != nil {
		return nil, fromStore(err)
	}
	res, err := c.cfg.Resender.ResendRevision(actx, d.ID, resendtype.Revision{ID: rev.ID, Topic: rev.TargetTopic,
		Key: rev.Key, Value: rev.Value, Headers: rev.Headers}, resendtype.ManualRequest{Principal: req.Principal, Reason: reason})
	if errors.Is(err, redrive.ErrClosed) {
		err = fmt.Errorf("%w: the resender is shutting down", redrive.ErrUnavailable)
	}
	outcome := resendOutcome(res)
	outcome.ID = d.ID
	if serr := c.store.SettleRevision(context.WithoutCancel(actx), rev.ID, string(outcome.Outcome), outcome.Detail, c.cfg.Now()); serr != nil {
		c.log.Error("operator: recording a revision's outcome failed", "revision", rev.ID, "error", serr)
	}
	rev.Outcome = string(outcome.Outcome)
	shown := c.revisionView(*rev, d.Topic, Reader{Principal: req.Principal, Payload: req.Payload})
	if err != nil {
		return &RepairResult{Revision: &shown, Outcome: outcome}, err
	}
	return &RepairResult{Revision: &shown, Outcome: outcome}, nil
}

// editedValue checks and converts the edited value of req.
func (c *Core) editedValue(d *redrive.FailureDetail, req RepairRequest) ([]byte, error) {
	v := req.Value
	if len(v) > MaxRepairBytes {
		return nil, invalid("value", "%d bytes, at most %d", len(v), MaxRepairBytes)
	}
	switch req.ValueFormat {
	case EditBytes, "":
		return v, nil
	case EditText:
		if !utf8.Valid(v) {
			return nil, invalid("value", "not valid UTF-8 text")
		}
		return v, nil
	case EditJSON:
		if !json.Valid(v) {
			var syn *json.SyntaxError
			err := json.Unmarshal(v, new(any))
			if errors.As(err, &syn) {
				return nil, invalid("value", "not a JSON document: %s at byte %d", syn.Error(), syn.Offset)
			}
			return nil, invalid("value", "not a JSON document")
		}
		return v, nil
	case EditAvro, EditProtobuf, EditJSONSchema:
		out, err := c.PayloadDecoder(d.Cluster).Encode(d.Topic, string(PartValue), req.ValueFormat, d.Value, v)
		var pe *avro.PayloadError
		if errors.As(err, &pe) {
			return nil, unprocessable("value", "%s", pe.Detail)
		}
		return out, err
	}
	return nil, invalid("value_format", "%q is not bytes, text, json, avro, protobuf or jsonschema", req.ValueFormat)
}

// Revisions returns the revisions of a failure, oldest first, for reader: without the payload
// permission their bytes are removed; with it they are masked by the rules of the failure's own
// topic and of the revision's target topic (revisionView). An unknown failure wraps
// redrive.ErrNotFound.
func (c *Core) Revisions(ctx context.Context, id uuid.UUID, reader Reader) ([]redrive.Revision, error) {
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	d, err := c.store.FailureByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	revs, err := c.store.Revisions(ctx, id)
	if err != nil {
		return nil, err
	}
	for i := range revs {
		revs[i] = c.revisionView(revs[i], d.Topic, reader)
	}
	return revs, nil
}

// revisionView returns rev as reader may see it (viewRecord): masked by the rules of the
// failure's own topic, whose data the revision is, and by those of its target topic.
func (c *Core) revisionView(rev redrive.Revision, failureTopic string, reader Reader) redrive.Revision {
	rv := c.viewRecord(rev.Key, rev.Value, rev.Headers, reader, failureTopic, rev.TargetTopic)
	rev.Key, rev.Value, rev.Headers = rv.Key, rv.Value, rv.Headers
	return rev
}

// RepairTopics returns the topics a repair may send to besides the failure's own.
func (c *Core) RepairTopics() []string { return append([]string(nil), c.cfg.RepairTopics...) }
