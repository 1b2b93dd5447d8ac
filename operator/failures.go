package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/store"
)

// ListRequest selects a page of failures.
type ListRequest struct {
	Filter redrive.Filter
	Order  redrive.Order
	// Limit is the page size, 1 to redrive.MaxListLimit. Defaults to 50.
	Limit int
	// Cursor is the Next of the previous page, in the same Order; empty for the first page.
	Cursor string
	// Total asks for the number of failures the filter selects, counted up to TotalCap.
	Total bool
	// Reader is who asks: the criteria it may search by follow the confidentiality policy
	// (payload, key and header value terms need the payload permission; masked bytes are
	// never searchable).
	Reader Reader
}

// TotalCap is the count up to which a list's total is exact; beyond it the total says "more
// than TotalCap", so that counting stays cheap at any table size.
const TotalCap = 10000

// FailurePage is one page of failures.
type FailurePage struct {
	Items []redrive.FailureSummary
	// Next is the cursor of the following page; empty on the last page.
	Next string
	// Total is the number of failures the filter selects, when asked for: exact up to
	// TotalCap; TotalMore says there are more than that.
	Total     *int64
	TotalMore bool
	// FieldScan reports the scan of a decoded field search (Filter.PayloadField); nil
	// without one. Its pages may hold fewer items than the limit while Next is not empty.
	FieldScan *FieldScan
}

// ListFailures returns one page of the failures req selects. A criterion req.Reader may not
// search by is a forbidden *InputError.
func (c *Core) ListFailures(ctx context.Context, req ListRequest) (*FailurePage, error) {
	limit, err := pageLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	if err := c.checkFilter(req.Filter, req.Reader); err != nil {
		return nil, err
	}
	p := store.ListParams{Filter: req.Filter, Order: req.Order, Limit: limit}
	if req.Cursor != "" {
		after, err := decodeFailureCursor(req.Cursor, req.Order)
		if err != nil {
			return nil, err
		}
		p.After = after
	}
	if req.Filter.PayloadField != "" {
		return c.listDecoded(ctx, req, limit, p.After)
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	rows, more, err := c.store.ListFailures(ctx, p)
	if err != nil {
		return nil, fromStore(err)
	}
	page := &FailurePage{Items: rows}
	if more && len(rows) > 0 {
		page.Next = encodeFailureCursor(rows[len(rows)-1].Position(), req.Order)
	}
	if req.Total {
		n, over, err := c.store.CountFailuresCapped(ctx, req.Filter, TotalCap)
		if err != nil {
			return nil, fromStore(err)
		}
		page.Total, page.TotalMore = &n, over
	}
	return page, nil
}

// pageLimit returns a page size: DefaultPageSize for 0, else 1 to redrive.MaxListLimit.
func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n < 1 || n > redrive.MaxListLimit:
		return 0, invalid("limit", "%d is not from 1 to %d", n, redrive.MaxListLimit)
	}
	return n, nil
}

// CountFailures counts the failures f selects; a criterion reader may not search by is a
// forbidden *InputError. A decoded field search is counted by decoding every candidate, and
// refused (decodedIDs) when there are more than one request decodes.
func (c *Core) CountFailures(ctx context.Context, f redrive.Filter, reader Reader) (int64, error) {
	if err := c.checkFilter(f, reader); err != nil {
		return 0, err
	}
	if f.PayloadField != "" {
		ids, err := c.decodedIDs(ctx, f, nil)
		return int64(len(ids)), err
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	n, err := c.store.CountFailures(ctx, f)
	return n, fromStore(err)
}

// FailureView is everything about one failure: what is stored, the attempt chain of its
// causing message (first attempt first) and its audit entries (oldest first). For a reader
// without the payload permission the key, value and header values are removed (KeySize,
// ValueSize and HeaderSizes keep their sizes) and PayloadHidden says why; otherwise the
// masking rules of the topic are applied and Masked says whether they changed anything.
type FailureView struct {
	*redrive.FailureDetail
	Chain []redrive.FailureSummary
	// Parked is the failure's ordering-guard chain (redrive.ParkedChain); zero when it is in none.
	Parked redrive.ParkedChain
	Audit  []redrive.AuditEntry
	// PayloadHidden, when not empty, says why the payload is not shown.
	PayloadHidden string
	// KeySize is the key's length (-1 for a null key), ValueSize the value's, HeaderSizes each
	// header value's (-1 for a null one): known even when the bytes are hidden.
	KeySize, ValueSize int
	HeaderSizes        []int
	// KeyType and ValueType say what the bytes look like (ContentType), hidden or not.
	KeyType, ValueType string
	// Masked says that the masking rules changed what is shown.
	Masked bool
	// original is the stored value, for views that decode it before masking.
	original []byte
}

// AuditActionPayloadView is the audit action of a payload read.
const AuditActionPayloadView = "payload_view"

// Failure returns the failure with id as reader may see it, or an error wrapping redrive.ErrNotFound.
// A reader with the payload permission sees the payload masked by the rules, and the read is
// audited.
func (c *Core) Failure(ctx context.Context, id uuid.UUID, reader Reader) (*FailureView, error) {
	qctx, cancel := c.queryContext(ctx)
	defer cancel()
	d, err := c.store.FailureByID(qctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	chain, err := c.store.AttemptChain(qctx, d.CausingMessage, MaxChain)
	if err != nil {
		return nil, err
	}
	parked, err := c.store.ParkedChain(qctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	audit, err := c.store.FailureAudit(qctx, id, MaxAudit)
	if err != nil {
		return nil, err
	}
	// Recorded after the audit is read: the view shows what happened before it.
	if reader.Payload {
		if err := c.auditPayloadView(qctx, id, reader, "detail"); err != nil {
			return nil, err
		}
	}
	v := &FailureView{FailureDetail: d, Chain: chain, Parked: parked, Audit: audit, KeySize: -1, ValueSize: len(d.Value),
		KeyType: ContentType(d.Key), ValueType: ContentType(d.Value)}
	if d.Key != nil {
		v.KeySize = len(d.Key)
	}
	v.HeaderSizes = make([]int, len(d.Headers))
	for i, h := range d.Headers {
		v.HeaderSizes[i] = -1
		if h.Value != nil {
			v.HeaderSizes[i] = len(h.Value)
		}
	}
	// A copy, so that the stored record is never changed by a view.
	f := *d
	v.FailureDetail = &f
	c.redactAudit(v.Audit, reader)
	rv := c.viewRecord(d.Key, d.Value, d.Headers, reader, d.Topic)
	f.Key, f.Value, f.Headers, v.Masked = rv.Key, rv.Value, rv.Headers, rv.Masked
	if rv.Hidden {
		v.PayloadHidden = HiddenReason
		return v, nil
	}
	v.original = d.Value
	return v, nil
}

// auditPayloadView records that reader saw the payload of failure id (how: "detail", or the
// part and format of a download).
func (c *Core) auditPayloadView(ctx context.Context, id uuid.UUID, reader Reader, how string) error {
	return c.store.AppendAudit(ctx, []redrive.AuditEntry{{FailureID: &id, Action: AuditActionPayloadView,
		Principal: reader.Principal, Details: map[string]any{"view": how}}}, c.cfg.Now())
}

// Part names a payload of a failure's record.
type Part string

// The parts of a record.
const (
	PartValue Part = "value"
	PartKey   Part = "key"
)

// ParsePart reads a part name; "" is the value.
func ParsePart(field, s string) (Part, error) {
	switch Part(s) {
	case "", PartValue:
		return PartValue, nil
	case PartKey:
		return PartKey, nil
	}
	return "", invalid(field, "%q is not value or key", clip.Text(s, clip.Default))
}

// Payload is one part of a failure's record as its reader may see it.
type Payload struct {
	ID    uuid.UUID
	Topic string
	// Cluster is the Kafka cluster of the failure, whose schema registry decodes the part.
	Cluster string
	Part    Part
	// Bytes are the part's bytes, masked when Masked says so.
	Bytes  []byte
	Masked bool
	// original are the stored bytes, for views that decode them before masking.
	original []byte
}

// Payload returns the key or value of the failure with id, masked by the rules of its topic
// (the value; a key is shown as stored), for reader, and audits the read. A reader without the
// payload permission gets an error wrapping redrive.ErrPayloadForbidden; a null key wraps
// redrive.ErrNullPart; an unknown id wraps redrive.ErrNotFound.
func (c *Core) Payload(ctx context.Context, id uuid.UUID, part Part, reader Reader, how string) (*Payload, error) {
	p, err := c.loadPayload(ctx, id, part, reader)
	if err != nil {
		return nil, err
	}
	if err := c.auditPayloadView(ctx, id, reader, string(part)+" "+how); err != nil {
		return nil, err
	}
	return p, nil
}

// DecodedPayload returns the key or value of the failure with id decoded with its writer
// schema and masked (as DecodePayload), for reader, and audits the read when it succeeds.
// format, when not empty, is the only format asked for (payload.FormatAvro, …): a payload of
// another format is an *avro.PayloadError naming what it is, and nothing is shown or audited.
// Errors are those of Payload, or an *avro.PayloadError when the bytes do not decode.
func (c *Core) DecodedPayload(ctx context.Context, id uuid.UUID, part Part, reader Reader, format string) (*payload.Decoded, error) {
	p, err := c.loadPayload(ctx, id, part, reader)
	if err != nil {
		return nil, err
	}
	d, err := c.DecodePayload(p)
	if err != nil {
		return nil, err
	}
	if format != "" && d.Format != format {
		return nil, &avro.PayloadError{Framing: d.Framing, Err: avro.ErrUnknownFraming,
			Detail: fmt.Sprintf("the %s is %s, not %s", part, d.Describe(), formatName(format))}
	}
	if err := c.auditPayloadView(ctx, id, reader, string(part)+" format=decoded"); err != nil {
		return nil, err
	}
	return d, nil
}

// loadPayload reads a part of a failure's record for reader, masked.
func (c *Core) loadPayload(ctx context.Context, id uuid.UUID, part Part, reader Reader) (*Payload, error) {
	if !reader.Payload {
		return nil, fmt.Errorf("%w: %s", redrive.ErrPayloadForbidden, HiddenReason)
	}
	ctx, cancel := c.queryContext(ctx)
	defer cancel()
	d, err := c.store.FailureByID(ctx, id)
	if err != nil {
		return nil, fromStore(err)
	}
	rv := c.viewRecord(d.Key, d.Value, nil, reader, d.Topic)
	p := &Payload{ID: id, Topic: d.Topic, Cluster: d.Cluster, Part: part, Bytes: rv.Value, Masked: rv.Masked, original: d.Value}
	if part == PartKey {
		if d.Key == nil {
			return nil, fmt.Errorf("key of %s: %w", id, redrive.ErrNullPart)
		}
		p.Bytes, p.Masked, p.original = rv.Key, false, d.Key
	}
	return p, nil
}

// DecodeFailure decodes the value of a failure's view as DecodePayload does (masked); a view
// whose payload is hidden gets an error wrapping ErrPayloadForbidden.
func (c *Core) DecodeFailure(v *FailureView) (*payload.Decoded, error) {
	if v.PayloadHidden != "" {
		return nil, fmt.Errorf("%w: %s", redrive.ErrPayloadForbidden, HiddenReason)
	}
	return c.DecodePayload(&Payload{ID: v.ID, Topic: v.Topic, Cluster: v.Cluster, Part: PartValue, original: v.original})
}

// DecodePayload decodes p with its writer schema (see payload.Decoder: Avro, Protobuf or JSON
// Schema from the registry, or plain JSON) and applies the masking rules of its topic to the
// decoded JSON, exactly as to a JSON value: the rules' JSON pointers address the decoded
// fields. A JSON Schema payload's validation errors name places in the document, and so are
// withheld when the rules mask anything of it. The error is an *avro.PayloadError, whose text
// is safe to show.
func (c *Core) DecodePayload(p *Payload) (*payload.Decoded, error) {
	d, err := c.PayloadDecoder(p.Cluster).Decode(p.Topic, string(p.Part), p.original)
	if err != nil {
		return nil, err
	}
	if p.Part == PartValue {
		masked := *d
		masked.JSON, p.Masked = c.cfg.Masking.Value(p.Topic, d.JSON)
		if !json.Valid(masked.JSON) { // masked whole: show the asterisks as a JSON string
			masked.JSON, _ = json.Marshal(string(masked.JSON))
		}
		if p.Masked && d.Validation != nil && !d.Validation.Valid {
			masked.Validation = &payload.Validation{Errors: []string{MaskedValidation}}
		}
		return &masked, nil
	}
	return d, nil
}

// PayloadDecoder returns the decoder of the Kafka cluster's payloads: the one of
// Config.ClusterPayloads for the cluster, or Config.Payloads for a cluster without one (an
// unknown cluster, a row stored before clusters had names).
func (c *Core) PayloadDecoder(cluster string) *payload.Decoder {
	if d := c.cfg.ClusterPayloads[cluster]; d != nil {
		return d
	}
	return c.cfg.Payloads
}

// MaskedValidation replaces the validation errors of a JSON Schema payload that the masking
// rules change: an error may quote a masked value.
const MaskedValidation = "the document does not validate against its schema; the details are withheld because masking rules hide parts of it"

// ContentType says what bytes look like, without showing them: "application/json" for a JSON
// document, "application/vnd.apache.avro" for a payload framed as Avro (single-object
// encoding, or the Confluent wire format), "text/plain" for other printable UTF-8 text,
// "application/octet-stream" for anything else, and "" for nil (a null key or a tombstone).
func ContentType(b []byte) string {
	switch {
	case b == nil:
		return ""
	case len(b) >= 10 && b[0] == 0xc3 && b[1] == 0x01:
		return "application/vnd.apache.avro"
	case json.Valid(b):
		return "application/json"
	case len(b) >= 6 && b[0] == 0x00:
		return "application/vnd.apache.avro"
	case utf8Text(b):
		return "text/plain"
	}
	return "application/octet-stream"
}

// utf8Text reports whether b is UTF-8 whose only control characters are tab, newline and
// carriage return.
func utf8Text(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// formatName names a payload format in a sentence.
func formatName(f string) string {
	switch f {
	case payload.FormatAvro:
		return "framed as Avro"
	case payload.FormatProtobuf:
		return "Protobuf"
	case payload.FormatJSONSchema:
		return "JSON Schema"
	}
	return f
}
