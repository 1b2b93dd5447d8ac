package avro

import (
	"fmt"
	"slices"
	"strconv"
)

// This file writes Avro binary datums of the event, key and header list directly, field by
// field in the order of the contract, without goavro's generic map-based encoder: dead-lettering
// must cost about as much as consuming a record. Tests check it byte for byte against goavro and
// against the contract's vectors; goavro still decodes, so every write is checked by an
// independent reader.

// HeaderList is an ordered list of record headers that AppendEventHeaders writes into the
// metadata header map without building the map first, the way Metadata.SetHeaders builds it.
// Producers implement it over their own header type to avoid copying.
type HeaderList interface {
	// Len returns the number of headers.
	Len() int
	// Header returns the name and value of header i; a nil value is a null value.
	Header(i int) (name string, value []byte)
}

// Headers is a HeaderList over a slice of Header.
type Headers []Header

// Len returns the number of headers.
func (hs Headers) Len() int { return len(hs) }

// Header returns header i.
func (hs Headers) Header(i int) (string, []byte) { return hs[i].Name, hs[i].Value }

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
	return append(appendLong(b, int64(len(s))), s...)
}

func appendBytes(b []byte, p []byte) []byte {
	return append(appendLong(b, int64(len(p))), p...)
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

func appendDecimal(b []byte, v int64) []byte {
	var tmp [20]byte
	d := strconv.AppendInt(tmp[:0], v, 10)
	return appendBytes(b, d)
}

// AppendEvent appends the Avro binary datum of e (no framing) to b. A metadata header map with
// several entries is written in the order of its names, so equal events give equal bytes.
func AppendEvent(b []byte, e *Event) ([]byte, error) {
	return AppendEventHeaders(b, e, nil)
}

// AppendEventHeaders is AppendEvent for producers that hold the failed record's headers in their
// own type: when e has metadata whose Headers map is nil, the map is written from hs the way
// Metadata.SetHeaders builds it (every header by name, the last value winning and null written
// as empty bytes, plus the HeadersEntry list that keeps order, duplicates and nulls).
func AppendEventHeaders(b []byte, e *Event, hs HeaderList) ([]byte, error) {
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
	b = appendDecimal(b, int64(m.Partition))
	b = appendDecimal(b, m.Offset)
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
		if md.Headers == nil && hs != nil {
			b = appendHeaderMap(b, hs)
		} else {
			b = appendMap(b, md.Headers)
		}
	}
	b = appendOptString(b, e.ProcessID)
	b = appendString(b, e.DomainEventVersion)
	return b, nil
}

// appendMap writes a map<bytes> as one block, entries ordered by name.
func appendMap(b []byte, m map[string][]byte) []byte {
	if len(m) > 0 {
		b = appendLong(b, int64(len(m)))
		if len(m) == 1 {
			for k, v := range m {
				b = appendBytes(appendString(b, k), v)
			}
		} else {
			names := make([]string, 0, len(m))
			for k := range m {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, k := range names {
				b = appendBytes(appendString(b, k), m[k])
			}
		}
	}
	return append(b, 0)
}

// appendHeaderMap writes the metadata header map built from hs (see AppendEventHeaders), in the
// order of hs.
func appendHeaderMap(b []byte, hs HeaderList) []byte {
	n := 1 // the list entry
	for i := range hs.Len() {
		if lastOfName(hs, i) {
			n++
		}
	}
	b = appendLong(b, int64(n))
	for i := range hs.Len() {
		if !lastOfName(hs, i) {
			continue
		}
		name, value := hs.Header(i)
		b = appendBytes(appendString(b, name), value) // a null value is written as empty bytes
	}
	b = appendString(b, HeadersEntry)
	// The list's datum is a bytes value: write it after room for its length, then move it.
	mark := len(b)
	b = appendHeaderList(b, hs)
	size := len(b) - mark
	var lenBuf [10]byte
	l := appendLong(lenBuf[:0], int64(size))
	b = append(b, l...)
	copy(b[mark+len(l):], b[mark:mark+size])
	copy(b[mark:], l)
	return append(b, 0)
}

// lastOfName reports whether header i is the last of its name, and its name is not the reserved
// list entry (which the list entry itself replaces).
func lastOfName(hs HeaderList, i int) bool {
	name, _ := hs.Header(i)
	if name == HeadersEntry {
		return false
	}
	for j := i + 1; j < hs.Len(); j++ {
		if other, _ := hs.Header(j); other == name {
			return false
		}
	}
	return true
}

// appendHeaderList appends the datum of the ordered header list kept in the HeadersEntry entry.
func appendHeaderList(b []byte, hs HeaderList) []byte {
	if n := hs.Len(); n > 0 {
		b = appendLong(b, int64(n))
		for i := range n {
			name, value := hs.Header(i)
			b = appendOptBytes(appendString(b, name), value)
		}
	}
	return append(b, 0)
}

// AppendKey appends the Avro binary datum of the key record k.
func AppendKey(b []byte, k Key) []byte { return appendString(b, k.Key) }
