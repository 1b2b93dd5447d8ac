package avro

import (
	"encoding/json"
	"fmt"
)

// A guard walks a datum against its schema before goavro decodes it. goavro preallocates maps and
// arrays for the block count a datum announces (up to 2^31 items), so a few hostile bytes could
// make it allocate gigabytes; the guard refuses any block that announces more items than the
// remaining bytes could hold (every item takes at least one byte), and names the field and byte
// position of a truncated or malformed datum.

type kind int

const (
	kNull kind = iota
	kBoolean
	kInt
	kLong
	kFloat
	kDouble
	kBytes
	kString
	kRecord
	kEnum
	kArray
	kMap
	kUnion
	kFixed
)

type node struct {
	kind     kind
	name     string  // field name for record fields, type name otherwise
	fields   []*node // record fields
	branches []*node // union branches
	items    *node   // array items or map values
	symbols  int     // enum symbol count
	size     int     // fixed size
}

// parseGuard builds a guard tree from a schema's JSON. It understands the subset of Avro that
// appears in schemas compiled by goavro (named references included).
func parseGuard(schema string) (*node, error) {
	var v any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		return nil, err
	}
	named := map[string]*node{}
	return buildNode(v, "", named)
}

func buildNode(v any, ns string, named map[string]*node) (*node, error) {
	switch t := v.(type) {
	case string:
		return primitive(t, ns, named)
	case []any:
		u := &node{kind: kUnion}
		for _, b := range t {
			n, err := buildNode(b, ns, named)
			if err != nil {
				return nil, err
			}
			u.branches = append(u.branches, n)
		}
		return u, nil
	case map[string]any:
		typ, _ := t["type"].(string)
		if typ == "" {
			return buildNode(t["type"], ns, named)
		}
		switch typ {
		case "record", "error":
			name, _ := t["name"].(string)
			full, recNS := fullName(name, t["namespace"], ns)
			n := &node{kind: kRecord, name: full}
			named[full] = n
			fields, _ := t["fields"].([]any)
			for _, f := range fields {
				fm, _ := f.(map[string]any)
				fn, err := buildNode(fm["type"], recNS, named)
				if err != nil {
					return nil, err
				}
				field := *fn
				field.name, _ = fm["name"].(string)
				n.fields = append(n.fields, &field)
			}
			return n, nil
		case "enum":
			name, _ := t["name"].(string)
			full, _ := fullName(name, t["namespace"], ns)
			syms, _ := t["symbols"].([]any)
			n := &node{kind: kEnum, name: full, symbols: len(syms)}
			named[full] = n
			return n, nil
		case "fixed":
			name, _ := t["name"].(string)
			full, _ := fullName(name, t["namespace"], ns)
			size, _ := t["size"].(float64)
			n := &node{kind: kFixed, name: full, size: int(size)}
			named[full] = n
			return n, nil
		case "array", "map":
			key := "items"
			k := kArray
			if typ == "map" {
				key, k = "values", kMap
			}
			items, err := buildNode(t[key], ns, named)
			if err != nil {
				return nil, err
			}
			return &node{kind: k, items: items}, nil
		default:
			return primitive(typ, ns, named)
		}
	}
	return nil, fmt.Errorf("unsupported schema element %T", v)
}

func fullName(name string, nsAttr any, enclosing string) (full, ns string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name, name[:i]
		}
	}
	ns = enclosing
	if s, ok := nsAttr.(string); ok {
		ns = s
	}
	if ns == "" {
		return name, ""
	}
	return ns + "." + name, ns
}

func primitive(t, ns string, named map[string]*node) (*node, error) {
	switch t {
	case "null":
		return &node{kind: kNull}, nil
	case "boolean":
		return &node{kind: kBoolean}, nil
	case "int":
		return &node{kind: kInt}, nil
	case "long":
		return &node{kind: kLong}, nil
	case "float":
		return &node{kind: kFloat}, nil
	case "double":
		return &node{kind: kDouble}, nil
	case "bytes":
		return &node{kind: kBytes}, nil
	case "string":
		return &node{kind: kString}, nil
	}
	if n, ok := named[t]; ok {
		return n, nil
	}
	if n, ok := named[ns+"."+t]; ok {
		return n, nil
	}
	return nil, fmt.Errorf("unknown type %q", t)
}

// walker checks one datum; pos is the byte offset into the datum.
type walker struct {
	buf []byte
	pos int
}

func (w *walker) truncated(path, what string) error {
	return decodeErr(CheckTruncated, ErrTruncated, "%s: %s at byte %d: datum ends after %d bytes", path, what, w.pos, len(w.buf))
}

func (w *walker) invalid(path, format string, args ...any) error {
	return decodeErr(CheckDatum, ErrInvalidDatum, "%s at byte %d: %s", path, w.pos, fmt.Sprintf(format, args...))
}

func (w *walker) varint(path string) (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if w.pos >= len(w.buf) {
			return 0, w.truncated(path, "varint")
		}
		if shift >= 64 {
			return 0, w.invalid(path, "varint longer than 10 bytes")
		}
		b := w.buf[w.pos]
		w.pos++
		u |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

func (w *walker) skip(n int64, path, what string) error {
	if n < 0 {
		return w.invalid(path, "negative %s length %d", what, n)
	}
	if n > int64(len(w.buf)-w.pos) {
		return w.truncated(path, fmt.Sprintf("%s of %d bytes", what, n))
	}
	w.pos += int(n)
	return nil
}

func (w *walker) walk(n *node, path string) error {
	switch n.kind {
	case kNull:
		return nil
	case kBoolean:
		return w.skip(1, path, "boolean")
	case kInt, kLong, kEnum:
		_, err := w.varint(path)
		return err
	case kFloat:
		return w.skip(4, path, "float")
	case kDouble:
		return w.skip(8, path, "double")
	case kFixed:
		return w.skip(int64(n.size), path, "fixed")
	case kBytes, kString:
		l, err := w.varint(path)
		if err != nil {
			return err
		}
		return w.skip(l, path, "string or bytes")
	case kRecord:
		for _, f := range n.fields {
			p := f.name
			if path != "" {
				p = path + "." + f.name
			}
			if err := w.walk(f, p); err != nil {
				return err
			}
		}
		return nil
	case kUnion:
		i, err := w.varint(path)
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(n.branches)) {
			return w.invalid(path, "union branch %d of %d", i, len(n.branches))
		}
		return w.walk(n.branches[i], path)
	case kArray, kMap:
		for {
			count, err := w.varint(path)
			if err != nil {
				return err
			}
			if count == 0 {
				return nil
			}
			if count < 0 {
				if count == -1<<63 {
					return w.invalid(path, "block count %d", count)
				}
				count = -count
				if _, err := w.varint(path); err != nil { // block size in bytes
					return err
				}
			}
			if count > int64(len(w.buf)-w.pos) {
				return w.truncated(path, fmt.Sprintf("block of %d items", count))
			}
			for i := int64(0); i < count; i++ {
				if n.kind == kMap {
					if err := w.walk(&node{kind: kString}, path+"{key}"); err != nil {
						return err
					}
				}
				if err := w.walk(n.items, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return w.invalid(path, "unsupported schema kind %d", n.kind)
}
