package avro

import (
	"fmt"
	"sort"
)

// EncodeHeaderList returns the Avro binary datum of the ordered header list that the
// HeadersEntry metadata entry carries (contract: "redrive extension: exact headers").
func EncodeHeaderList(hs []Header) ([]byte, error) {
	return appendHeaderList(nil, Headers(hs)), nil
}

// DecodeHeaderList decodes the datum written by EncodeHeaderList. A nil value stays nil.
func DecodeHeaderList(datum []byte) ([]Header, error) {
	sc := mustBuiltin().headers
	w := walker{buf: datum}
	if err := w.walk(sc.guard, HeadersEntry); err != nil {
		return nil, err
	}
	native, rest, err := sc.codec.NativeFromBinary(datum)
	if err != nil {
		return nil, classifyDatumErr(HeadersEntry, len(datum), err)
	}
	if len(rest) > 0 {
		return nil, decodeErr(CheckTrailing, ErrTrailingBytes, "%d bytes after the %s datum", len(rest), HeadersEntry)
	}
	items, ok := native.([]any)
	if !ok {
		return nil, decodeErr(CheckDatum, ErrInvalidDatum, "%s: not an array (%T)", HeadersEntry, native)
	}
	r := &reader{}
	hs := make([]Header, 0, len(items))
	for i, it := range items {
		path := fmt.Sprintf("%s[%d]", HeadersEntry, i)
		m := r.record(it, path)
		h := Header{Name: r.str(m, "name", path)}
		if v := r.union(m, "value", branchBytes, path); v != nil {
			h.Value = r.bytes(v, path+".value")
		}
		hs = append(hs, h)
	}
	if r.err != nil {
		return nil, r.err
	}
	return hs, nil
}

// SetHeaders writes hs into m.Headers the way a redrive producer does: every header as a plain
// entry (the last value per name wins, a null value becomes empty bytes), plus the HeadersEntry
// entry that keeps the complete ordered list with duplicates and nulls. A header that is itself
// named HeadersEntry is kept only in the list.
func (m *Metadata) SetHeaders(hs []Header) error {
	list, err := EncodeHeaderList(hs)
	if err != nil {
		return err
	}
	m.Headers = make(map[string][]byte, len(hs)+1)
	for _, h := range hs {
		m.Headers[h.Name] = nonNil(h.Value)
	}
	m.Headers[HeadersEntry] = list
	return nil
}

// OriginalHeaders returns the failed record's headers: exactly, from the HeadersEntry entry when
// present; otherwise from the plain map entries, ordered by name (a map keeps no order).
func (m *Metadata) OriginalHeaders() ([]Header, error) {
	if m == nil || len(m.Headers) == 0 {
		return nil, nil
	}
	if list, ok := m.Headers[HeadersEntry]; ok {
		hs, err := DecodeHeaderList(list)
		if err != nil {
			return nil, fmt.Errorf("failedMessageMetadata.headers[%q]: %w", HeadersEntry, err)
		}
		return hs, nil
	}
	names := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	hs := make([]Header, len(names))
	for i, n := range names {
		hs[i] = Header{Name: n, Value: m.Headers[n]}
	}
	return hs, nil
}
