package redrive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of a decoded field search (Filter.PayloadField).
const (
	// MaxPayloadFieldPointer bounds Filter.PayloadField in bytes.
	MaxPayloadFieldPointer = 500
	// MaxPayloadFieldSegments bounds the segments of Filter.PayloadField.
	MaxPayloadFieldSegments = 32
)

// ParsePayloadPointer parses p, a JSON pointer (RFC 6901) over a payload decoded to JSON, as
// the masking rules write them: "/" and then segments separated by "/", in which "~1" stands
// for "/" and "~0" for "~". A segment "*" matches any member of an object and any element of
// an array; a segment of decimal digits matches an object's member of that name and an
// array's element at that index (counted from 0). The pointer must name a member ("/" alone,
// an empty segment, or a "~" not followed by 0 or 1 is refused), and has at most
// MaxPayloadFieldSegments segments. It returns the segments, unescaped.
func ParsePayloadPointer(p string) ([]string, error) {
	switch {
	case p == "":
		return nil, fmt.Errorf("empty: give a JSON pointer such as /customer/email")
	case len(p) > MaxPayloadFieldPointer:
		return nil, fmt.Errorf("%d bytes, at most %d", len(p), MaxPayloadFieldPointer)
	case p[0] != '/':
		return nil, fmt.Errorf("%q is not a JSON pointer: it must start with / (such as /customer/email)", clipText(p))
	}
	if !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 {
		return nil, fmt.Errorf("not valid UTF-8 without NUL characters")
	}
	raw := strings.Split(p[1:], "/")
	if len(raw) > MaxPayloadFieldSegments {
		return nil, fmt.Errorf("%d segments, at most %d", len(raw), MaxPayloadFieldSegments)
	}
	segs := make([]string, len(raw))
	for i, s := range raw {
		if s == "" {
			return nil, fmt.Errorf("%q has an empty segment: name a member in each", clipText(p))
		}
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, fmt.Errorf("%q has a ~ that is not ~0 (for ~) or ~1 (for /)", clipText(p))
			}
		}
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return segs, nil
}

// PayloadFieldMatch is a decoded field search: the field at Pointer (ParsePayloadPointer's
// segments) is present; with Value, one such field's value is exactly Value; with Contains,
// one such field's value contains Contains. A value compares by its text: a string as the
// string, a number, true, false or null as its JSON text; an object or an array matches only
// presence.
type PayloadFieldMatch struct {
	Pointer  []string
	Value    string
	Contains string
}

// PayloadFieldMatch returns the decoded field search of f, or nil when f has none. f must be
// valid (Validate).
func (f *Filter) PayloadFieldMatch() *PayloadFieldMatch {
	if f.PayloadField == "" {
		return nil
	}
	segs, err := ParsePayloadPointer(f.PayloadField)
	if err != nil {
		return nil
	}
	return &PayloadFieldMatch{Pointer: segs, Value: f.PayloadFieldValue, Contains: f.PayloadFieldContains}
}

// Matches reports whether the JSON document doc has a field that m matches. A document that
// is not JSON matches nothing.
func (m *PayloadFieldMatch) Matches(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false
	}
	return walkPointer(v, m.Pointer, m.matchValue)
}

// matchValue reports whether v, a field the pointer addresses, matches m.
func (m *PayloadFieldMatch) matchValue(v any) bool {
	if m.Value == "" && m.Contains == "" {
		return true
	}
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case json.Number:
		text = x.String()
	case bool:
		text = strconv.FormatBool(x)
	case nil:
		text = "null"
	default: // an object or an array
		return false
	}
	if m.Value != "" {
		return text == m.Value
	}
	return strings.Contains(text, m.Contains)
}

// walkPointer reports whether fn holds for one of the values of v that segs address.
func walkPointer(v any, segs []string, fn func(any) bool) bool {
	if len(segs) == 0 {
		return fn(v)
	}
	s, rest := segs[0], segs[1:]
	switch x := v.(type) {
	case map[string]any:
		if s == "*" {
			for _, e := range x {
				if walkPointer(e, rest, fn) {
					return true
				}
			}
			return false
		}
		e, ok := x[s]
		return ok && walkPointer(e, rest, fn)
	case []any:
		if s == "*" {
			for _, e := range x {
				if walkPointer(e, rest, fn) {
					return true
				}
			}
			return false
		}
		i, ok := arrayIndex(s)
		return ok && i < len(x) && walkPointer(x[i], rest, fn)
	}
	return false
}

// arrayIndex returns the index a segment names: decimal digits without a leading zero (RFC
// 6901), "0" itself included.
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
