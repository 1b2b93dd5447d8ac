// Package masking hides personal data in the payload views of redrive (the API, the UI, exports):
// fields of JSON values by path, header values by name, or whole values, by topic. It changes
// views only; the stored originals, and what a resend publishes, stay as they are.
//
// Rules come from a file, one per line:
//
//	# TOPIC-PATTERN  KIND    TARGET
//	orders.*         json    /customer/email
//	orders.*         json    /cards/*/number
//	payments         header  authorization
//	secrets.*        value
//
// TOPIC-PATTERN is a glob on the original topic (path.Match: * ? [a-z]). KIND json masks the
// value at a JSON pointer (RFC 6901; a segment * matches any member or index); header masks
// the values of the headers with that name (any case); value masks the whole value. A masked
// part is replaced by asterisks of the same length in bytes (a JSON string keeps its quotes; a
// masked number, object or array becomes a string of asterisks, so the document stays JSON).
// A value that a json rule applies to but that is not a JSON document is masked whole: the
// rules fail closed. A malformed line is refused with its number.
//
// The operator core's confidentiality policy also asks the rules which bytes they hide
// (MasksValue, MasksHeader, MasksAnyValue, MasksAnyHeader), so that masked bytes are never
// searchable: a search of them would tell a secret from a wrong guess.
package masking

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/redrive/redrive/avro"
)

// Kinds of rule.
const (
	KindJSON   = "json"
	KindHeader = "header"
	KindValue  = "value"
)

// rule is one line of a rules file.
type rule struct {
	topic   string   // glob
	kind    string   // KindJSON, KindHeader or KindValue
	pointer []string // KindJSON: the path's segments ("*" matches any)
	header  string   // KindHeader: lower-cased name
}

// Rules is a set of masking rules. The zero value masks nothing. It is safe for concurrent use.
type Rules struct {
	rules []rule
}

// Load reads the rules file at file.
func Load(file string) (*Rules, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("masking rules: %w", err)
	}
	defer f.Close()
	return Parse(f, file)
}

// Parse reads rules from r; name says where they come from in errors ("FILE line N: …").
func Parse(r io.Reader, name string) (*Rules, error) {
	out := &Rules{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rl, err := parseRule(strings.Fields(line))
		if err != nil {
			return nil, fmt.Errorf("masking rules %s line %d: %w", name, n, err)
		}
		out.rules = append(out.rules, rl)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("masking rules %s: %w", name, err)
	}
	return out, nil
}

func parseRule(f []string) (rule, error) {
	if len(f) < 2 {
		return rule{}, errors.New(`want "TOPIC-PATTERN KIND [TARGET]" (kind json, header or value)`)
	}
	r := rule{topic: f[0], kind: f[1]}
	if _, err := path.Match(r.topic, ""); err != nil {
		return rule{}, fmt.Errorf("topic pattern %q: %w", r.topic, err)
	}
	switch r.kind {
	case KindValue:
		if len(f) != 2 {
			return rule{}, errors.New("a value rule takes no target")
		}
	case KindHeader:
		if len(f) != 3 {
			return rule{}, errors.New("a header rule takes one header name")
		}
		r.header = strings.ToLower(f[2])
	case KindJSON:
		if len(f) != 3 {
			return rule{}, errors.New("a json rule takes one JSON pointer, e.g. /customer/email")
		}
		p := f[2]
		if !strings.HasPrefix(p, "/") || p == "/" {
			return rule{}, fmt.Errorf("JSON pointer %q must start with / and name a member", p)
		}
		for _, seg := range strings.Split(p[1:], "/") {
			if seg == "" {
				return rule{}, fmt.Errorf("JSON pointer %q has an empty segment", p)
			}
			r.pointer = append(r.pointer, strings.NewReplacer("~1", "/", "~0", "~").Replace(seg))
		}
	default:
		return rule{}, fmt.Errorf("unknown kind %q (want json, header or value)", r.kind)
	}
	return r, nil
}

// Len returns the number of rules.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return len(r.rules)
}

func (r *rule) applies(topic string) bool {
	ok, _ := path.Match(r.topic, topic)
	return ok
}

// Value returns the view of a record value of topic, and whether anything was masked. A nil
// value (a tombstone) stays nil.
func (r *Rules) Value(topic string, value []byte) ([]byte, bool) {
	if r == nil || value == nil {
		return value, false
	}
	var pointers [][]string
	for i := range r.rules {
		rl := &r.rules[i]
		if !rl.applies(topic) {
			continue
		}
		switch rl.kind {
		case KindValue:
			return stars(len(value)), len(value) > 0
		case KindJSON:
			pointers = append(pointers, rl.pointer)
		}
	}
	if len(pointers) == 0 {
		return value, false
	}
	out, changed, err := maskJSON(value, pointers)
	if err != nil {
		return stars(len(value)), len(value) > 0 // not JSON: fail closed
	}
	return out, changed
}

// Headers returns the view of a record's headers of topic, and whether anything was masked.
// Names and order stay; a null value stays null.
func (r *Rules) Headers(topic string, hs []avro.Header) ([]avro.Header, bool) {
	if r == nil {
		return hs, false
	}
	names := map[string]bool{}
	for i := range r.rules {
		if rl := &r.rules[i]; rl.kind == KindHeader && rl.applies(topic) {
			names[rl.header] = true
		}
	}
	if len(names) == 0 {
		return hs, false
	}
	out := make([]avro.Header, len(hs))
	changed := false
	for i, h := range hs {
		out[i] = h
		if h.Value != nil && names[strings.ToLower(h.Name)] {
			out[i].Value, changed = stars(len(h.Value)), true
		}
	}
	return out, changed
}

// MasksValue reports whether a rule masks some or all of the values of topic (a value or a
// json rule applies to it). A search of such values would tell masked bytes from others, so
// the operator core refuses it.
func (r *Rules) MasksValue(topic string) bool {
	if r == nil {
		return false
	}
	for i := range r.rules {
		if rl := &r.rules[i]; rl.kind != KindHeader && rl.applies(topic) {
			return true
		}
	}
	return false
}

// MasksHeader reports whether a rule masks the values of the headers named name (any case)
// of topic.
func (r *Rules) MasksHeader(topic, name string) bool {
	if r == nil {
		return false
	}
	name = strings.ToLower(name)
	for i := range r.rules {
		if rl := &r.rules[i]; rl.kind == KindHeader && rl.header == name && rl.applies(topic) {
			return true
		}
	}
	return false
}

// MasksAnyValue reports whether a value or json rule exists for any topic: a search of values
// across every topic could reach masked bytes.
func (r *Rules) MasksAnyValue() bool {
	if r == nil {
		return false
	}
	for i := range r.rules {
		if r.rules[i].kind != KindHeader {
			return true
		}
	}
	return false
}

// MasksAnyHeader reports whether a header rule for name (any case) exists for any topic.
func (r *Rules) MasksAnyHeader(name string) bool {
	if r == nil {
		return false
	}
	name = strings.ToLower(name)
	for i := range r.rules {
		if rl := &r.rules[i]; rl.kind == KindHeader && rl.header == name {
			return true
		}
	}
	return false
}

// stars returns n asterisks.
func stars(n int) []byte { return bytes.Repeat([]byte{'*'}, n) }

// maskJSON replaces the values at pointers in the JSON document b, keeping everything else
// byte for byte.
func maskJSON(b []byte, pointers [][]string) ([]byte, bool, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	type span struct{ start, end int64 }
	var spans []span
	var walk func(at []string) error
	walk = func(at []string) error {
		if matches(at, pointers) {
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			end := dec.InputOffset()
			spans = append(spans, span{end - int64(len(v)), end})
			return nil
		}
		switch dec.PeekKind() {
		case '{':
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
			for dec.PeekKind() != '}' {
				name, err := dec.ReadToken()
				if err != nil {
					return err
				}
				if err := walk(append(at, name.String())); err != nil {
					return err
				}
			}
			_, err := dec.ReadToken()
			return err
		case '[':
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
			for i := 0; dec.PeekKind() != ']'; i++ {
				if err := walk(append(at, strconv.Itoa(i))); err != nil {
					return err
				}
			}
			_, err := dec.ReadToken()
			return err
		case 0:
			_, err := dec.ReadToken() // the decoder's error about what is there
			if err == nil {
				err = errors.New("unexpected end of JSON")
			}
			return err
		default:
			_, err := dec.ReadValue()
			return err
		}
	}
	if err := walk(nil); err != nil {
		return nil, false, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false, errors.New("data after the JSON document")
	}
	if len(spans) == 0 {
		return b, false, nil
	}
	out := append([]byte(nil), b...)
	for i := len(spans) - 1; i >= 0; i-- { // from the end: a replacement may change the length
		s := spans[i]
		seg := out[s.start:s.end]
		if seg[0] == '"' { // a string keeps its quotes and its length
			copy(seg[1:len(seg)-1], stars(len(seg)-2))
			continue
		}
		// A number, literal, object or array becomes a string of as many asterisks.
		repl := append(append([]byte{'"'}, stars(len(seg))...), '"')
		out = append(out[:s.start:s.start], append(repl, out[s.end:]...)...)
	}
	return out, true, nil
}

// matches reports whether the path at matches one of the pointers.
func matches(at []string, pointers [][]string) bool {
	for _, p := range pointers {
		if len(p) != len(at) || len(p) == 0 {
			continue
		}
		ok := true
		for i := range p {
			if p[i] != "*" && p[i] != at[i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
