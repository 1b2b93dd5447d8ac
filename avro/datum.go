package avro

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Schema is a compiled Avro schema of any type, for reading datums that are not events: the
// original payloads of failed records, shown by the operator UI. It applies the same guard
// against hostile block counts as the event codec. It is safe for concurrent use.
type Schema struct {
	sc *schemaCodec
}

// CompileSchema compiles an Avro schema given as JSON. A nested named type that declares its
// own namespace inside another namespace should be written with its full name: goavro computes
// the fingerprint of such a schema wrongly otherwise (see the package's known pitfall).
func CompileSchema(schema string) (*Schema, error) {
	sc, err := compile(schema)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return &Schema{sc: sc}, nil
}

// Fingerprint returns the CRC-64-AVRO fingerprint of the schema's Parsing Canonical Form in
// the little-endian byte order of single-object encoding.
func (s *Schema) Fingerprint() [8]byte { return s.sc.fingerprint }

// DatumJSON decodes one bare binary datum of the schema and returns it as JSON, with record
// fields in schema order, map keys sorted, a union value as {"branch": value} (null as null),
// bytes and fixed as strings of the code points U+0000 to U+00FF (as Avro's JSON encoding
// writes them), and logical types as goavro reads them (timestamps in RFC 3339). A datum that
// is malformed, truncated or followed by other bytes gives a *DecodeError.
func (s *Schema) DatumJSON(datum []byte) ([]byte, error) {
	w := walker{buf: datum}
	if err := w.walk(s.sc.guard, ""); err != nil {
		return nil, err
	}
	if w.pos < len(datum) {
		return nil, decodeErr(CheckTrailing, ErrTrailingBytes, "%d bytes after the datum (datum is %d bytes)", len(datum)-w.pos, w.pos)
	}
	native, rest, err := s.sc.codec.NativeFromBinary(datum)
	if err != nil {
		return nil, classifyDatumErr("payload", len(datum), err)
	}
	if len(rest) > 0 {
		return nil, decodeErr(CheckTrailing, ErrTrailingBytes, "%d bytes after the datum (datum is %d bytes)", len(rest), len(datum)-len(rest))
	}
	var out bytes.Buffer
	if err := writeJSON(&out, s.sc.guard, native); err != nil {
		return nil, decodeErr(CheckDatum, ErrInvalidDatum, "datum to JSON: %v", err)
	}
	return out.Bytes(), nil
}

// kindNames are the type names goavro uses as union keys for the primitive kinds.
var kindNames = map[kind]string{kNull: "null", kBoolean: "boolean", kInt: "int", kLong: "long", kFloat: "float",
	kDouble: "double", kBytes: "bytes", kString: "string"}

// writeJSON writes the goavro native value v of the schema node n.
func writeJSON(w *bytes.Buffer, n *node, v any) error {
	if v == nil {
		w.WriteString("null")
		return nil
	}
	switch n.kind {
	case kRecord:
		m, ok := v.(map[string]any)
		if !ok {
			return writeScalar(w, v)
		}
		w.WriteByte('{')
		for i, f := range n.fields {
			if i > 0 {
				w.WriteByte(',')
			}
			writeString(w, f.name)
			w.WriteByte(':')
			if err := writeJSON(w, f, m[f.name]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
		return nil
	case kArray:
		items, ok := v.([]any)
		if !ok {
			return writeScalar(w, v)
		}
		w.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSON(w, n.items, it); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	case kMap:
		m, ok := v.(map[string]any)
		if !ok {
			return writeScalar(w, v)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteByte(',')
			}
			writeString(w, k)
			w.WriteByte(':')
			if err := writeJSON(w, n.items, m[k]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
		return nil
	case kUnion:
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return writeScalar(w, v)
		}
		for key, val := range m {
			w.WriteByte('{')
			writeString(w, key)
			w.WriteByte(':')
			var err error
			if b := unionBranch(n, key); b != nil {
				err = writeJSON(w, b, val)
			} else {
				err = writeScalar(w, val)
			}
			w.WriteByte('}')
			return err
		}
	case kBytes, kFixed:
		if b, ok := v.([]byte); ok {
			r := make([]rune, len(b))
			for i, c := range b {
				r[i] = rune(c)
			}
			writeString(w, string(r))
			return nil
		}
	}
	return writeScalar(w, v)
}

// unionBranch returns the branch of union n that goavro names key: a named type by its full
// name, a primitive by its name (with a logical type: "long.timestamp-millis").
func unionBranch(n *node, key string) *node {
	for _, b := range n.branches {
		if b.name != "" && b.name == key {
			return b
		}
	}
	for _, b := range n.branches {
		if name, ok := kindNames[b.kind]; ok && (key == name || strings.HasPrefix(key, name+".")) {
			return b
		}
	}
	return nil
}

// writeScalar writes a primitive or logical-type value.
func writeScalar(w *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			writeString(w, strconv.FormatFloat(x, 'g', -1, 64))
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			writeString(w, strconv.FormatFloat(float64(x), 'g', -1, 32))
			return nil
		}
	case *big.Rat:
		f := x.FloatString(18)
		if strings.Contains(f, ".") {
			f = strings.TrimRight(strings.TrimRight(f, "0"), ".")
		}
		w.WriteString(f)
		return nil
	case time.Duration:
		writeString(w, x.String())
		return nil
	}
	return marshal(w, v)
}

func writeString(w *bytes.Buffer, s string) {
	_ = marshal(w, s) // a string always marshals
}

// marshal writes v as JSON without escaping <, > and & (the output is text, not HTML).
func marshal(w *bytes.Buffer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return nil
}
