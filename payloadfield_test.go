package redrive_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
)

// A pointer is read as RFC 6901 writes it, with the masking rules' wildcard; anything else is
// refused with what is wrong.
func TestParsePayloadPointer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
		bad  string
	}{
		{in: "/customer/email", want: []string{"customer", "email"}},
		{in: "/lines/*/sku", want: []string{"lines", "*", "sku"}},
		{in: "/lines/0", want: []string{"lines", "0"}},
		{in: "/a~1b/c~0d/~01", want: []string{"a/b", "c~d", "~1"}},
		{in: "/ spaced ", want: []string{" spaced "}},
		{in: "", bad: "empty"},
		{in: "/", bad: "empty segment"},
		{in: "customer", bad: "must start with /"},
		{in: "/a//b", bad: "empty segment"},
		{in: "/a~2", bad: "~0"},
		{in: "/a~", bad: "~0"},
		{in: "/a\x00", bad: "NUL"},
		{in: "/\xff", bad: "UTF-8"},
		{in: "/" + strings.Repeat("a", redrive.MaxPayloadFieldPointer), bad: "bytes, at most"},
		{in: strings.Repeat("/a", redrive.MaxPayloadFieldSegments+1), bad: "segments"},
	} {
		got, err := redrive.ParsePayloadPointer(tc.in)
		switch {
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.bad)
		case tc.bad == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// A field matches by presence, by its exact text or by a part of it; a wildcard matches any
// element; an index one; objects and arrays match only presence.
func TestPayloadFieldMatches(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"customer":{"email":"ada@example.com","vip":true,"note":null},"quantity":3,"total":{"units":"12","nanos":500000000},
		"lines":[{"sku":"A-1","quantity":2},{"sku":"B-2","quantity":1.50}],"a/b":{"~":"x"}}`)
	for _, tc := range []struct {
		ptr, value, contains string
		want                 bool
	}{
		{"/customer/email", "", "", true},
		{"/customer/phone", "", "", false},
		{"/customer/email", "ada@example.com", "", true},
		{"/customer/email", "ADA@example.com", "", false},
		{"/customer/email", "", "@example", true},
		{"/customer/email", "", "Example", false},
		{"/customer/vip", "true", "", true},
		{"/customer/note", "null", "", true},
		{"/customer/note", "", "", true},
		{"/quantity", "3", "", true},
		{"/quantity", "3.0", "", false},
		{"/total/units", "12", "", true},
		{"/total", "", "", true},
		{"/total", "{}", "", false},
		{"/total", "", "units", false},
		{"/lines/*/sku", "B-2", "", true},
		{"/lines/1/sku", "B-2", "", true},
		{"/lines/0/sku", "B-2", "", false},
		{"/lines/2/sku", "", "", false},
		{"/lines/01/sku", "B-2", "", false},
		{"/lines/-/sku", "", "", false},
		{"/lines/*/quantity", "1.50", "", true},
		{"/*/email", "ada@example.com", "", true},
		{"/a~1b/~0", "x", "", true},
		{"/customer/email/x", "", "", false},
	} {
		segs, err := redrive.ParsePayloadPointer(tc.ptr)
		if err != nil {
			t.Fatal(err)
		}
		m := redrive.PayloadFieldMatch{Pointer: segs, Value: tc.value, Contains: tc.contains}
		if got := m.Matches(doc); got != tc.want {
			t.Errorf("%s value %q contains %q: %v, want %v", tc.ptr, tc.value, tc.contains, got, tc.want)
		}
	}
	m := redrive.PayloadFieldMatch{Pointer: []string{"a"}}
	for _, notJSON := range []string{"", "{", `"*****"`, "not json"} {
		if m.Matches([]byte(notJSON)) {
			t.Errorf("%q matches", notJSON)
		}
	}
}

// A decoded field search is validated with the filter: its pointer, its terms, and its bounds,
// each refusal naming its field.
func TestFilterPayloadFieldValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		f     redrive.Filter
		field string
	}{
		{redrive.Filter{Topic: "t", PayloadField: "/a"}, ""},
		{redrive.Filter{CreatedFrom: now, CreatedTo: now.Add(24 * time.Hour), PayloadField: "/a", PayloadFieldValue: "x"}, ""},
		{redrive.Filter{PayloadField: "/a"}, "payload_field"},
		{redrive.Filter{CreatedFrom: now, CreatedTo: now.Add(40 * 24 * time.Hour), PayloadField: "/a"}, "payload_field"},
		{redrive.Filter{Topic: "t", PayloadField: "a"}, "payload_field"},
		{redrive.Filter{Topic: "t", PayloadFieldValue: "x"}, "payload_field_value"},
		{redrive.Filter{Topic: "t", PayloadFieldContains: "x"}, "payload_field_contains"},
		{redrive.Filter{Topic: "t", PayloadField: "/a", PayloadFieldValue: "x", PayloadFieldContains: "y"}, "payload_field_contains"},
		{redrive.Filter{Topic: "t", PayloadField: "/a", PayloadFieldValue: strings.Repeat("x", redrive.MaxPayloadSearch+1)}, "payload_field_value"},
	} {
		err := tc.f.Validate()
		var fe *redrive.FilterError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.f, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%+v: %v, want an error on %s", tc.f, err, tc.field)
		}
	}
	if (&redrive.Filter{PayloadField: "/a"}).IsZero() {
		t.Error("a filter with payload_field is zero")
	}
	full := redrive.Filter{Topic: "t", PayloadField: "/a", PayloadFieldValue: "x"}
	sql := full.SQLPart()
	if sql.PayloadField != "" || sql.PayloadFieldValue != "" || sql.Topic != "t" {
		t.Errorf("SQLPart = %+v", sql)
	}
}

// FuzzParsePayloadPointer: any text either parses into segments that escape back to it, or is
// refused; matching a parsed pointer against any document never panics.
func FuzzParsePayloadPointer(f *testing.F) {
	for _, s := range []string{"/customer/email", "/lines/*/sku", "/lines/0", "/a~1b/~0", "/", "", "a", "/a~", "/a~2", "//", "/\xff", "/0/01/-"} {
		f.Add(s, []byte(`{"customer":{"email":"x"},"lines":[{"sku":"A"}],"a/b":{"~":1}}`))
	}
	f.Fuzz(func(t *testing.T, p string, doc []byte) {
		segs, err := redrive.ParsePayloadPointer(p)
		if err != nil {
			return
		}
		if len(segs) == 0 || len(segs) > redrive.MaxPayloadFieldSegments {
			t.Fatalf("%q: %d segments", p, len(segs))
		}
		var b strings.Builder
		for _, s := range segs {
			if s == "" {
				t.Fatalf("%q: an empty segment", p)
			}
			b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
		}
		if b.String() != p {
			t.Fatalf("%q: segments %q write back as %q", p, segs, b.String())
		}
		for _, m := range []redrive.PayloadFieldMatch{{Pointer: segs}, {Pointer: segs, Value: "x"}, {Pointer: segs, Contains: "1"}} {
			m.Matches(doc)
		}
	})
}
