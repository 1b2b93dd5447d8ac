package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/payload"
)

// Why a repair form does not start from a part of the record.
const (
	// WithheldValueMasked: the reader sees the value masked.
	WithheldValueMasked = "the value is masked for you, so the form does not start from it: leave it as it is to keep the original value, or give the whole new value"
	// WithheldHeadersMasked: the reader sees a header value masked.
	WithheldHeadersMasked = "header values are masked for you, so the form does not show the headers: the repair keeps the original headers"
)

// RepairStart is what a repair form starts from for one reader: the stored original of each
// part the reader sees as it is stored, and nothing of a part that is hidden or masked for
// them, so that a repair never sends a view (asterisks) in place of the original.
type RepairStart struct {
	// Value is the original value to edit, in Format: EditJSON (indented), EditAvro (the datum
	// in Avro's JSON encoding), EditProtobuf (protojson), EditJSONSchema (the document) or
	// EditText. It is nil, with Format "", when the value is none
	// of these (bytes: a file is uploaded instead), a tombstone, or withheld.
	Value  []byte
	Format string
	// ValueWithheld, when not empty, says why the form does not start from the value. A repair
	// that gives no value keeps the original.
	ValueWithheld string
	// Headers are the original headers, in order; nil when withheld.
	Headers []avro.Header
	// HeadersWithheld, when not empty, says why the form does not start from the headers. A
	// repair that gives no headers keeps the original ones.
	HeadersWithheld string
}

// RepairStart returns what the repair form of the failure in v (as Failure returned it for
// the reader) starts from. A part starts from the stored original only when the reader sees it
// exactly as stored: with the payload permission and unmasked.
func (c *Core) RepairStart(ctx context.Context, v *FailureView) (*RepairStart, error) {
	if v.PayloadHidden != "" {
		return &RepairStart{ValueWithheld: v.PayloadHidden, HeadersWithheld: v.PayloadHidden}, nil
	}
	qctx, cancel := c.queryContext(ctx)
	d, err := c.store.FailureByID(qctx, v.ID)
	cancel()
	if err != nil {
		return nil, fromStore(err)
	}
	s := &RepairStart{}
	switch {
	case !sameBytes(v.Value, d.Value):
		s.ValueWithheld = WithheldValueMasked
	case d.Value == nil || d.ValueNull:
	case json.Valid(d.Value):
		var b bytes.Buffer
		if json.Indent(&b, d.Value, "", "  ") == nil {
			s.Value, s.Format = b.Bytes(), EditJSON
		}
	case ContentType(d.Value) == "application/vnd.apache.avro":
		p, err := c.PayloadDecoder(d.Cluster).Decode(d.Topic, string(PartValue), d.Value)
		if err != nil || p.Format == payload.FormatJSON {
			if err == nil || !utf8.Valid(d.Value) {
				break
			}
			s.Value, s.Format = d.Value, EditText
			break
		}
		// The datum as the reader sees it must be the datum as stored, too.
		if seen, err := c.DecodeFailure(v); err != nil || !bytes.Equal(seen.JSON, p.JSON) {
			s.ValueWithheld = WithheldValueMasked
			break
		}
		var b bytes.Buffer
		if json.Indent(&b, p.JSON, "", "  ") == nil {
			s.Value, s.Format = b.Bytes(), p.Format // EditAvro, EditProtobuf or EditJSONSchema
		}
	case utf8.Valid(d.Value):
		s.Value, s.Format = d.Value, EditText
	}
	if len(v.Headers) != len(d.Headers) {
		s.HeadersWithheld = WithheldHeadersMasked
		return s, nil
	}
	for i, h := range d.Headers {
		if v.Headers[i].Name != h.Name || !sameBytes(v.Headers[i].Value, h.Value) {
			s.HeadersWithheld = WithheldHeadersMasked
			return s, nil
		}
	}
	s.Headers = d.Headers
	return s, nil
}

// sameBytes reports whether a and b are equal, a nil slice differing from an empty one.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// refusePlaceholders refuses a repair whose value or header values still hold the mask's
// placeholders: the runs of asterisks that the masking rules show in place of the original's
// bytes (in the stored value, in its decoded JSON, in the header values). Runs of
// asterisks that the original itself holds are not placeholders.
func (c *Core) refusePlaceholders(d *redrive.FailureDetail, req RepairRequest) error {
	if req.Value != nil {
		runs := placeholderRuns(d.Value, c.maskedValue(d.Topic, d.Value))
		if req.ValueFormat == EditAvro || req.ValueFormat == EditProtobuf || req.ValueFormat == EditJSONSchema ||
			ContentType(d.Value) == "application/vnd.apache.avro" {
			if p, err := c.PayloadDecoder(d.Cluster).Decode(d.Topic, string(PartValue), d.Value); err == nil {
				for n := range placeholderRuns(p.JSON, c.maskedValue(d.Topic, p.JSON)) {
					runs[n] = true
				}
			}
		}
		if n := placeholderIn(req.Value, runs); n > 0 {
			return unprocessable("value", "holds %d asterisks where the masked view hides the original: give the real value, or leave the value out to keep the original", n)
		}
	}
	if req.Headers != nil {
		view, _ := c.cfg.Masking.Headers(d.Topic, d.Headers)
		runs := map[int]bool{}
		for i, h := range d.Headers {
			for n := range placeholderRuns(h.Value, view[i].Value) {
				runs[n] = true
			}
		}
		for i, h := range req.Headers {
			if n := placeholderIn(h.Value, runs); n > 0 {
				return unprocessable(fmt.Sprintf("headers[%d].value", i),
					"holds %d asterisks where the masked view hides the original value of a header: give the real value, or leave the headers out to keep the original ones", n)
			}
		}
	}
	return nil
}

// maskedValue is the view of a value of topic under the masking rules.
func (c *Core) maskedValue(topic string, value []byte) []byte {
	v, _ := c.cfg.Masking.Value(topic, value)
	return v
}

// asteriskRuns returns the lengths of the maximal runs of '*' in b, with their counts.
func asteriskRuns(b []byte) map[int]int {
	runs := map[int]int{}
	n := 0
	for i := 0; i <= len(b); i++ {
		if i < len(b) && b[i] == '*' {
			n++
			continue
		}
		if n > 0 {
			runs[n]++
		}
		n = 0
	}
	return runs
}

// placeholderRuns returns the lengths of the runs of asterisks in view that original does not
// hold as often: the placeholders of what masking hid.
func placeholderRuns(original, view []byte) map[int]bool {
	out := map[int]bool{}
	if bytes.Equal(original, view) {
		return out
	}
	orig := asteriskRuns(original)
	for n, k := range asteriskRuns(view) {
		if k > orig[n] {
			out[n] = true
		}
	}
	return out
}

// placeholderIn returns the length of the longest run of asterisks in b that is one of the
// placeholders, or 0.
func placeholderIn(b []byte, placeholders map[int]bool) int {
	longest := 0
	if len(placeholders) == 0 {
		return 0
	}
	for n := range asteriskRuns(b) {
		if placeholders[n] && n > longest {
			longest = n
		}
	}
	return longest
}
