package errorhandler

import (
	"fmt"
	"strconv"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/redrive/redrive/avro"
)

// This file writes the Avro binary datum of an MPFE directly, field by field in the order of
// the contract, without the generic map-based encoder: dead-lettering must cost about as much as
// consuming a record. Tests check that avro.UnmarshalEvent reads back exactly what was written
// and that the bytes equal avro.MarshalEvent's wherever map order cannot differ.

// appendLong appends v as an Avro long (zig-zag varint).
func appendLong(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

func appendString(b []byte, s string) []byte {
	b = appendLong(b, int64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = appendLong(b, int64(len(p)))
	return append(b, p...)
}

// Union branches ["null", T]: branch 0 is null, branch 1 is T.
const (
	unionNull  = 0x00
	unionValue = 0x02 // zig-zag of 1
)

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, unionNull)
	}
	return appendString(append(b, unionValue), *s)
}

func appendOptBytes(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, unionNull)
	}
	return appendBytes(append(b, unionValue), p)
}

// appendHeaderList appends the datum of the ordered header list kept in the "redrive-headers"
// metadata entry (the same bytes as avro.EncodeHeaderList).
func appendHeaderList(b []byte, hs []kafka.Header) []byte {
	if len(hs) > 0 {
		b = appendLong(b, int64(len(hs)))
		for _, h := range hs {
			b = appendString(b, h.Key)
			b = appendOptBytes(b, h.Value)
		}
	}
	return append(b, 0)
}

// appendEvent appends the Avro binary datum of e. When e's metadata has no header map, the map
// is written from hs the way avro.Metadata.SetHeaders builds it: every header by name (the last
// value wins, null as empty bytes) plus the ordered list entry.
func appendEvent(b []byte, e *avro.Event, hs []kafka.Header) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	b = appendString(b, e.Identity.EventID)
	b = appendString(b, e.Identity.IdempotenceID)
	b = appendLong(b, e.Identity.Created.UnixMilli())

	b = appendString(b, e.Type.Name)
	b = appendString(b, e.Type.Version)
	b = appendOptString(b, e.Type.Variant)

	b = appendString(b, e.Publisher.System)
	b = appendString(b, e.Publisher.Service)

	m := &e.References.Message
	b = appendString(b, m.Type)
	b = appendString(b, m.TopicName)
	b = appendLong(b, int64(len(strconv.AppendInt(nil, int64(m.Partition), 10))))
	b = strconv.AppendInt(b, int64(m.Partition), 10)
	b = appendLong(b, int64(len(strconv.AppendInt(nil, m.Offset, 10))))
	b = strconv.AppendInt(b, m.Offset, 10)
	t := &e.References.ErrorType
	b = appendString(b, t.Type)
	b = appendString(b, string(t.Temporality))
	b = appendString(b, t.Code)

	p := &e.Payload
	b = appendBytes(b, p.OriginalMessage)
	b = appendOptBytes(b, p.OriginalKey)
	b = appendString(b, p.ErrorMessage)
	b = appendOptString(b, p.ErrorDescription)
	b = appendOptString(b, p.StackTrace)
	b = appendOptString(b, p.StackTraceHash)
	if md := p.FailedMessageMetadata; md == nil {
		b = append(b, unionNull)
	} else {
		b = append(b, unionValue)
		b = appendOptString(b, md.EventID)
		b = appendOptString(b, md.IdempotenceID)
		if md.Created == nil {
			b = append(b, unionNull)
		} else {
			b = appendLong(append(b, unionValue), md.Created.UnixMilli())
		}
		b = appendOptString(b, md.System)
		b = appendOptString(b, md.Service)
		b = appendOptString(b, md.MessageTypeName)
		b = appendOptString(b, md.MessageTypeVersion)
		if md.Headers != nil {
			if len(md.Headers) > 0 {
				b = appendLong(b, int64(len(md.Headers)))
				for k, v := range md.Headers {
					b = appendString(b, k)
					b = appendBytes(b, v)
				}
			}
			b = append(b, 0)
		} else {
			b = appendHeaders(b, hs)
		}
	}
	b = appendOptString(b, e.ProcessID)
	b = appendString(b, e.DomainEventVersion)
	return b, nil
}

// appendKey appends the Avro binary datum of the key record.
func appendKey(b []byte, k avro.Key) []byte { return appendString(b, k.Key) }

// appendHeaders appends the metadata header map built from hs (see appendEvent).
func appendHeaders(b []byte, hs []kafka.Header) []byte {
	n := 1 // the list entry
	for i := range hs {
		if lastOfName(hs, i) {
			n++
		}
	}
	b = appendLong(b, int64(n))
	for i, h := range hs {
		if !lastOfName(hs, i) {
			continue
		}
		b = appendString(b, h.Key)
		b = appendBytes(b, h.Value) // a nil value is written as empty bytes
	}
	b = appendString(b, avro.HeadersEntry)
	mark := len(b)
	b = appendHeaderList(b, hs)
	// The list's datum is a bytes value: its length goes before it.
	list := append([]byte(nil), b[mark:]...)
	b = appendBytes(b[:mark], list)
	return append(b, 0)
}

// lastOfName reports whether hs[i] is the last header of its name, and its name is not the
// reserved list entry (which the list entry itself replaces).
func lastOfName(hs []kafka.Header, i int) bool {
	if hs[i].Key == avro.HeadersEntry {
		return false
	}
	for j := i + 1; j < len(hs); j++ {
		if hs[j].Key == hs[i].Key {
			return false
		}
	}
	return true
}
