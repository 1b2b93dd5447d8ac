package operator

import (
	"maps"
	"strings"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
)

// The confidentiality policy of payloads, in one place. Every use case of the core that
// returns, renders, exports, searches, counts or describes payload bytes (a record's key,
// value and header values) goes through the functions of this file:
//
//   - viewRecord decides what of a record a reader sees: nothing but names and sizes without
//     the payload permission; with it, the record masked by the rules of every topic it
//     belongs to (a failure's own topic, and a revision's target topic too).
//   - checkFilter decides which criteria a reader may search by: key, key prefix, payload,
//     decoded field and header values need the payload permission, and a payload or header
//     value that the masking rules hide is never searchable (the answer is refused whatever
//     the term, so a secret and a wrong guess get the same answer).
//   - fieldMatches matches a decoded field search over the masked decoded view, the one the
//     reader would see, so a masked field reads as asterisks whatever it holds.
//   - redactFilter, redactAudit and redactJob remove the terms of a described filter that
//     could hold payload bytes, for readers who may not see them (job selections, audit
//     details).
//
// docs/confidentiality.md draws the policy as a table of paths and principals.

// Reader is who reads a failure: the principal, for the audit log of payload views, and
// whether it holds the payload permission.
type Reader struct {
	Principal string
	// Payload is the permission to read payload bytes and header values.
	Payload bool
}

// HiddenReason is why a reader without the payload permission sees no payload.
const HiddenReason = "reading payloads and header values needs the payload permission (a role granted \"+payload\", or admin)"

// HiddenTerm replaces, in a described filter (a job's selection, an audit entry), a term that
// could hold payload bytes and that the reader may not see.
const HiddenTerm = "(hidden)"

// recordView is a record as a reader may see it.
type recordView struct {
	Key, Value []byte
	Headers    []avro.Header
	// Hidden says the reader lacks the payload permission: Key and Value are nil and the
	// headers keep only their names.
	Hidden bool
	// Masked says the masking rules changed the value or a header value.
	Masked bool
}

// viewRecord returns the record (key, value, headers) as reader may see it: without the
// payload permission only the header names; with it, the value and headers masked by the rules
// of each of topics (a failure's own topic first; a revision adds its target topic), so that a
// part masked on any of them stays masked. The inputs are never changed.
func (c *Core) viewRecord(key, value []byte, headers []avro.Header, reader Reader, topics ...string) recordView {
	if !reader.Payload {
		names := make([]avro.Header, len(headers))
		for i, h := range headers {
			names[i] = avro.Header{Name: h.Name}
		}
		return recordView{Headers: names, Hidden: true}
	}
	v := recordView{Key: key, Value: value, Headers: headers}
	for i, t := range topics {
		if i > 0 && t == topics[0] {
			continue
		}
		var mv, mh bool
		v.Value, mv = c.cfg.Masking.Value(t, v.Value)
		v.Headers, mh = c.cfg.Masking.Headers(t, v.Headers)
		v.Masked = v.Masked || mv || mh
	}
	return v
}

// checkFilter returns an error when f holds a criterion that reader may not search by: a key,
// key prefix, payload, decoded field or header value without the payload permission; a payload term over a
// topic whose values the masking rules hide (or over every topic, when some topic's are); a
// header value term over a header the rules hide. The answer depends only on which criteria
// are given and on the topic, never on the terms themselves, so it cannot tell a secret from
// a wrong guess. The error is a forbidden *InputError naming the criterion.
func (c *Core) checkFilter(f redrive.Filter, reader Reader) error {
	if !reader.Payload {
		for _, p := range []struct {
			name  string
			given bool
		}{
			{ParamKey, f.Key != nil}, {ParamKeyPrefix, f.KeyPrefix != nil},
			{ParamPayload, f.Payload != nil}, {ParamHeader, f.HeaderValue != nil},
			{ParamPayloadField, f.PayloadField != "" || f.PayloadFieldValue != "" || f.PayloadFieldContains != ""},
		} {
			if p.given {
				return forbidden(p.name, "searching by %s needs the payload permission (a role granted \"+payload\", or admin)", filterTermName(p.name))
			}
		}
		return nil
	}
	// A decoded field search needs no refusal of masked topics: it matches the masked view
	// (fieldMatches), in which a masked field reads as asterisks whatever it holds.
	if f.Payload != nil {
		switch {
		case f.Topic != "" && c.cfg.Masking.MasksValue(f.Topic):
			return forbidden(ParamPayload, "masking rules hide parts of the values of topic %s: they cannot be searched", f.Topic)
		case f.Topic == "" && c.cfg.Masking.MasksAnyValue():
			return forbidden(ParamPayload, "masking rules hide parts of the values of some topics: give a topic whose values are not masked")
		}
	}
	if f.HeaderValue != nil {
		switch {
		case f.Topic != "" && c.cfg.Masking.MasksHeader(f.Topic, f.HeaderName):
			return forbidden(ParamHeader, "masking rules hide the values of header %s on topic %s: they cannot be searched", f.HeaderName, f.Topic)
		case f.Topic == "" && c.cfg.Masking.MasksAnyHeader(f.HeaderName):
			return forbidden(ParamHeader, "masking rules hide the values of header %s on some topics: give a topic where they are not masked", f.HeaderName)
		}
	}
	return nil
}

// filterTermName names a payload criterion in a refusal.
func filterTermName(param string) string {
	switch param {
	case ParamKeyPrefix:
		return "key prefix"
	case ParamHeader:
		return "header value"
	}
	return param
}

// payloadTerms are the parameters of a described filter whose values are payload bytes.
var payloadTerms = []string{ParamKey, ParamKeyBase64, ParamKeyPrefix, ParamKeyPrefixB64, ParamPayload, ParamPayloadB64,
	ParamPayloadField, ParamPayloadFieldValue, ParamPayloadFieldContains}

// redactFilter returns a copy of the described filter desc (describeFilter's form) in which
// every term that could hold payload bytes and that reader may not see reads HiddenTerm: all
// of them without the payload permission; with it, a payload term over a topic whose values
// are masked (or over every topic when some are) and a header value the rules hide. It
// reports whether it hid anything.
func (c *Core) redactFilter(desc map[string]any, reader Reader) (map[string]any, bool) {
	topic, _ := desc[ParamTopic].(string)
	valueHidden := !reader.Payload ||
		(topic != "" && c.cfg.Masking.MasksValue(topic)) || (topic == "" && c.cfg.Masking.MasksAnyValue())
	out := maps.Clone(desc)
	hid := false
	for _, name := range payloadTerms {
		if _, ok := out[name]; !ok {
			continue
		}
		isValue := name == ParamPayload || name == ParamPayloadB64 ||
			name == ParamPayloadField || name == ParamPayloadFieldValue || name == ParamPayloadFieldContains
		if !reader.Payload || (isValue && valueHidden) {
			out[name], hid = HiddenTerm, true
		}
	}
	if h, ok := out[ParamHeader].(string); ok {
		if name, _, hasValue := strings.Cut(h, "="); hasValue {
			masked := (topic != "" && c.cfg.Masking.MasksHeader(topic, name)) || (topic == "" && c.cfg.Masking.MasksAnyHeader(name))
			if !reader.Payload || masked {
				out[ParamHeader], hid = name+"="+HiddenTerm, true
			}
		}
	} else if _, ok := out[ParamHeader]; ok { // not the shape describeFilter writes: hide it
		out[ParamHeader], hid = HiddenTerm, true
	}
	return out, hid
}

// redactDetails returns details with its "filter" member, and that of its "selection" (a job's
// entries carry the job's selection), redacted for reader (redactFilter); details itself is
// not changed.
func (c *Core) redactDetails(details map[string]any, reader Reader) (map[string]any, bool) {
	var out map[string]any
	if f, ok := details["filter"].(map[string]any); ok {
		if red, hid := c.redactFilter(f, reader); hid {
			out = maps.Clone(details)
			out["filter"] = red
		}
	}
	if sel, ok := details["selection"].(map[string]any); ok {
		if red, hid := c.redactDetails(sel, reader); hid {
			if out == nil {
				out = maps.Clone(details)
			}
			out["selection"] = red
		}
	}
	if out == nil {
		return details, false
	}
	return out, true
}

// redactAudit redacts the filters described in the details of entries for reader, in place.
func (c *Core) redactAudit(entries []redrive.AuditEntry, reader Reader) {
	for i := range entries {
		entries[i].Details, _ = c.redactDetails(entries[i].Details, reader)
	}
}

// redactJob returns j with its selection's filter redacted for reader (j is not changed), and
// whether anything was hidden.
func (c *Core) redactJob(j *redrive.Job, reader Reader) (*redrive.Job, bool) {
	sel, hid := c.redactDetails(j.Selection, reader)
	if !hid {
		return j, false
	}
	cp := *j
	cp.Selection = sel
	return &cp, true
}
