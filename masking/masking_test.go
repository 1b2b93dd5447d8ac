package masking_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/masking"
)

const rulesText = `
# masking for the tests
orders.*   json    /customer/email
orders.*   json    /cards/*/number
orders.*   json    /id
payments   header  Authorization
secrets.*  value
`

func TestMasking(t *testing.T) {
	t.Parallel()
	r, err := masking.Parse(strings.NewReader(rulesText), "rules")
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(`{"id": 7, "customer": {"email": "ann@example.com", "name": "Ann"}, "cards": [{"number": "4111-1111"}, {"number": 42}], "note": "x"}`)
	out, changed := r.Value("orders.v1", in)
	want := `{"id": "*", "customer": {"email": "***************", "name": "Ann"}, "cards": [{"number": "*********"}, {"number": "**"}], "note": "x"}`
	// (a string keeps its quotes and length; the numbers 7 and 42 become "*" and "**")
	if !changed || string(out) != want {
		t.Errorf("masked JSON:\n%s\nwant\n%s", out, want)
	}
	if !json.Valid(out) {
		t.Error("the masked document is not JSON")
	}
	if strings.Contains(string(in), "***") {
		t.Error("the original was changed")
	}
	// Not JSON where a json rule applies: masked whole, same length.
	if out, changed := r.Value("orders.v1", []byte("name=ann")); !changed || string(out) != "********" {
		t.Errorf("non-JSON value = %q", out)
	}
	if out, changed := r.Value("secrets.keys", []byte{0, 1, 2}); !changed || string(out) != "***" {
		t.Errorf("value rule = %q", out)
	}
	if out, changed := r.Value("other", in); changed || string(out) != string(in) {
		t.Error("a value of another topic was masked")
	}
	if out, _ := r.Value("secrets.x", nil); out != nil {
		t.Error("a tombstone became a value")
	}
	hs := []avro.Header{{Name: "authorization", Value: []byte("Bearer abc")}, {Name: "trace", Value: []byte("t")}, {Name: "AUTHORIZATION", Value: nil}}
	got, changed := r.Headers("payments", hs)
	if !changed || string(got[0].Value) != "**********" || string(got[1].Value) != "t" || got[2].Value != nil || string(hs[0].Value) != "Bearer abc" {
		t.Errorf("headers = %+v", got)
	}
	var none *masking.Rules
	if out, changed := none.Value("orders.v1", in); changed || string(out) != string(in) {
		t.Error("nil rules masked something")
	}
}

func TestMaskingRulesErrors(t *testing.T) {
	t.Parallel()
	for text, line := range map[string]string{
		"orders":                     "line 1",
		"\norders json":              "line 2",
		"orders json customer/email": "line 1",
		"orders json //x":            "line 1",
		"orders header":              "line 1",
		"orders value extra":         "line 1",
		"orders xml /a":              "line 1",
		"[orders json /a":            "line 1",
		"# ok\norders.* value\nbad":  "line 3",
	} {
		_, err := masking.Parse(strings.NewReader(text), "masks.conf")
		if err == nil || !strings.Contains(err.Error(), "masks.conf "+line) {
			t.Errorf("%q: %v, want an error naming %s", text, err, line)
		}
	}
}

func FuzzMaskJSON(f *testing.F) {
	r, err := masking.Parse(strings.NewReader("t json /a\nt json /b/*/c"), "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"a": 1, "b": [{"c": "x"}]}`))
	f.Add([]byte(`[1, 2`))
	f.Add([]byte(`{"a": {"a": [1, {"a": 2}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, changed := r.Value("t", b)
		if changed && json.Valid(b) && !json.Valid(out) {
			t.Fatalf("masking JSON %q gave %q, not JSON", b, out)
		}
		if !changed && string(out) != string(b) {
			t.Fatalf("unchanged but different: %q -> %q", b, out)
		}
	})
}

func TestMasksQueries(t *testing.T) {
	t.Parallel()
	r, err := masking.Parse(strings.NewReader(rulesText), "rules")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"value orders.v1", r.MasksValue("orders.v1"), true},
		{"value secrets.x", r.MasksValue("secrets.x"), true},
		{"value payments", r.MasksValue("payments"), false},
		{"value other", r.MasksValue("other"), false},
		{"header payments authorization", r.MasksHeader("payments", "AUTHORIZATION"), true},
		{"header payments other", r.MasksHeader("payments", "x-trace"), false},
		{"header orders.v1 authorization", r.MasksHeader("orders.v1", "authorization"), false},
		{"any value", r.MasksAnyValue(), true},
		{"any header authorization", r.MasksAnyHeader("Authorization"), true},
		{"any header other", r.MasksAnyHeader("x-trace"), false},
		{"nil value", (*masking.Rules)(nil).MasksValue("orders.v1"), false},
		{"nil any", (*masking.Rules)(nil).MasksAnyValue() || (*masking.Rules)(nil).MasksAnyHeader("a") || (*masking.Rules)(nil).MasksHeader("a", "b"), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
