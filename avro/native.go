package avro

import (
	"fmt"
	"strconv"
	"time"
)

// Union branch names as goavro spells them.
const (
	branchString    = "string"
	branchBytes     = "bytes"
	branchTimestamp = "long.timestamp-millis"
	branchMetadata  = "ch.admin.bit.jeap.messaging.avro.errorevent.FailedMessageMetadata"
	branchHeader    = "io.redrive.Header"
)

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// reader walks a goavro native value and remembers the first problem, with its field path.
type reader struct {
	err error
}

func (r *reader) fail(path, format string, args ...any) {
	if r.err == nil {
		r.err = decodeErr(CheckDatum, ErrInvalidDatum, "%s: %s", path, fmt.Sprintf(format, args...))
	}
}

func (r *reader) record(v any, path string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		r.fail(path, "not a record (%T)", v)
		return map[string]any{}
	}
	return m
}

func (r *reader) str(m map[string]any, name, path string) string {
	v, ok := m[name]
	if !ok {
		r.fail(path+"."+name, "missing")
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(path+"."+name, "not a string (%T)", v)
	}
	return s
}

// union returns the branch value of an optional field, or nil for null or a missing field.
func (r *reader) union(m map[string]any, name, branch, path string) any {
	v := m[name]
	if v == nil {
		return nil
	}
	u, ok := v.(map[string]any)
	if !ok {
		r.fail(path+"."+name, "not a union (%T)", v)
		return nil
	}
	b, ok := u[branch]
	if !ok {
		r.fail(path+"."+name, "union has no %s branch", branch)
		return nil
	}
	return b
}

func (r *reader) optStr(m map[string]any, name, path string) *string {
	v := r.union(m, name, branchString, path)
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		r.fail(path+"."+name, "not a string (%T)", v)
		return nil
	}
	return &s
}

func (r *reader) bytes(v any, path string) []byte {
	b, ok := v.([]byte)
	if !ok {
		r.fail(path, "not bytes (%T)", v)
		return nil
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

func (r *reader) time(v any, path string) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case int64:
		return time.UnixMilli(t).UTC()
	}
	r.fail(path, "not a timestamp (%T)", v)
	return time.Time{}
}

func eventFromNative(native any) (*Event, error) {
	r := &reader{}
	root := r.record(native, "event")
	id := r.record(root["identity"], "identity")
	typ := r.record(root["type"], "type")
	pub := r.record(root["publisher"], "publisher")
	refs := r.record(root["references"], "references")
	msg := r.record(refs["message"], "references.message")
	et := r.record(refs["errorType"], "references.errorType")
	pay := r.record(root["payload"], "payload")

	e := &Event{
		Identity: Identity{
			EventID:       r.str(id, "eventId", "identity"),
			IdempotenceID: r.str(id, "idempotenceId", "identity"),
			Created:       r.time(id["created"], "identity.created"),
		},
		Type: EventType{
			Name:    r.str(typ, "name", "type"),
			Version: r.str(typ, "version", "type"),
			Variant: r.optStr(typ, "variant", "type"),
		},
		Publisher: Publisher{
			System:  r.str(pub, "system", "publisher"),
			Service: r.str(pub, "service", "publisher"),
		},
		References: References{
			Message: MessageReference{
				Type:      r.str(msg, "type", "references.message"),
				TopicName: r.str(msg, "topicName", "references.message"),
			},
			ErrorType: ErrorTypeReference{
				Type:        r.str(et, "type", "references.errorType"),
				Temporality: Temporality(r.str(et, "temporality", "references.errorType")),
				Code:        r.str(et, "code", "references.errorType"),
			},
		},
		Payload: Payload{
			OriginalMessage:  r.bytes(pay["originalMessage"], "payload.originalMessage"),
			ErrorMessage:     r.str(pay, "errorMessage", "payload"),
			ErrorDescription: r.optStr(pay, "errorDescription", "payload"),
			StackTrace:       r.optStr(pay, "stackTrace", "payload"),
			StackTraceHash:   r.optStr(pay, "stackTraceHash", "payload"),
		},
		ProcessID:          r.optStr(root, "processId", "event"),
		DomainEventVersion: r.str(root, "domainEventVersion", "event"),
	}
	if k := r.union(pay, "originalKey", branchBytes, "payload"); k != nil {
		e.Payload.OriginalKey = r.bytes(k, "payload.originalKey")
	}
	if mv := r.union(pay, "failedMessageMetadata", branchMetadata, "payload"); mv != nil {
		const path = "payload.failedMessageMetadata"
		mm := r.record(mv, path)
		md := &Metadata{
			EventID:            r.optStr(mm, "eventId", path),
			IdempotenceID:      r.optStr(mm, "idempotenceId", path),
			System:             r.optStr(mm, "system", path),
			Service:            r.optStr(mm, "service", path),
			MessageTypeName:    r.optStr(mm, "messageTypeName", path),
			MessageTypeVersion: r.optStr(mm, "messageTypeVersion", path),
			Headers:            map[string][]byte{},
		}
		if c := r.union(mm, "created", branchTimestamp, path); c != nil {
			t := r.time(c, path+".created")
			md.Created = &t
		}
		if hv, ok := mm["headers"]; ok && hv != nil {
			hm, ok := hv.(map[string]any)
			if !ok {
				r.fail(path+".headers", "not a map (%T)", hv)
			}
			for k, v := range hm {
				md.Headers[k] = r.bytes(v, path+".headers["+strconv.Quote(k)+"]")
			}
		}
		e.Payload.FailedMessageMetadata = md
	}
	if r.err != nil {
		return nil, r.err
	}
	partition := r.str(msg, "partition", "references.message")
	p, err := strconv.ParseInt(partition, 10, 32)
	if err != nil || p < 0 {
		return nil, decodeErr(CheckNumber, ErrBadNumber, "references.message.partition is %q, want a decimal int32 >= 0", partition)
	}
	offset := r.str(msg, "offset", "references.message")
	o, err := strconv.ParseInt(offset, 10, 64)
	if err != nil || o < 0 {
		return nil, decodeErr(CheckNumber, ErrBadNumber, "references.message.offset is %q, want a decimal int64 >= 0", offset)
	}
	e.References.Message.Partition = int32(p)
	e.References.Message.Offset = o
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}
