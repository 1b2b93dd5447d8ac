package jsonstrict_test

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/redrive/redrive/internal/jsonstrict"
)

type identity struct {
	EventID string `json:"eventId"`
	Millis  *int64 `json:"millis,omitempty"`
}

type document struct {
	Identity identity            `json:"identity"`
	Headers  map[string]identity `json:"headers"`
	Name     string              `json:"name"`
}

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	var d document
	if err := jsonstrict.Unmarshal([]byte(`{"identity": {"eventId": "e", "millis": 5}, "headers": {"a": {}}, "name": null}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Identity.EventID != "e" || *d.Identity.Millis != 5 || len(d.Headers) != 1 {
		t.Errorf("decoded %+v", d)
	}

	for _, c := range []struct {
		name, doc string
		is        error
		pointer   string
		want      string
	}{
		{"duplicate member", `{"identity": {"eventId": "a", "eventId": "b"}}`, jsonstrict.ErrDuplicateName, "/identity/eventId",
			`member "eventId" appears twice in object "/identity" (byte 30)`},
		{"duplicate at the top", `{"name": "a", "name": "b"}`, jsonstrict.ErrDuplicateName, "/name",
			`member "name" appears twice in the top-level object`},
		{"duplicate map key", `{"headers": {"k": {}, "k": {}}}`, jsonstrict.ErrDuplicateName, "/headers/k",
			`member "k" appears twice in object "/headers"`},
		{"case differs", `{"identity": {"EventId": "a"}}`, jsonstrict.ErrUnknownName, "/identity/EventId",
			`unknown member "EventId" in object "/identity" (byte 14) (member names match exactly, case included)`},
		{"all lower case", `{"Identity": {}}`, jsonstrict.ErrUnknownName, "/Identity", `unknown member "Identity" in the top-level object`},
		{"unknown member", `{"identity": {"eventId": "a", "extra": 1}}`, jsonstrict.ErrUnknownName, "/identity/extra", `unknown member "extra"`},
		{"long unknown name", `{"` + strings.Repeat("x", 1000) + `": 1}`, jsonstrict.ErrUnknownName, "/" + strings.Repeat("x", 1000), `"` + strings.Repeat("x", 64) + `…"`},
		{"wrong type", `{"name": 5}`, nil, "/name", `unmarshal JSON number into Go string within "/name"`}, // the library says "cannot" or "unable to", at random per process,
		{"fraction", `{"identity": {"millis": 1.5}}`, nil, "/identity/millis", `"/identity/millis"`},
		{"two values", `{} {}`, nil, "", `after top-level value`},
		{"empty", ``, nil, "", `unexpected EOF`},
		{"invalid UTF-8", "{\"name\": \"\xff\"}", nil, "/name", `invalid UTF-8`},
	} {
		var d document
		err := jsonstrict.Unmarshal([]byte(c.doc), &d)
		var e *jsonstrict.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: err = %v (%T), want an *Error", c.name, err, err)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: err = %v, want it to be %v", c.name, err, c.is)
		}
		if e.Pointer != c.pointer {
			t.Errorf("%s: pointer %q, want %q", c.name, e.Pointer, c.pointer)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q does not say %q", c.name, err.Error(), c.want)
		}
		if len(err.Error()) > 300 {
			t.Errorf("%s: a %d-byte message", c.name, len(err.Error()))
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	var d document
	if err := jsonstrict.Decode(strings.NewReader(`{"name": "n"}`), &d); err != nil || d.Name != "n" {
		t.Fatalf("Decode = %v, %+v", err, d)
	}
	if err := jsonstrict.Decode(strings.NewReader(`{"name": "n", "name": "m"}`), &d); !errors.Is(err, jsonstrict.ErrDuplicateName) {
		t.Errorf("Decode of a duplicate = %v", err)
	}
	readErr := errors.New("connection reset")
	err := jsonstrict.Decode(iotest.ErrReader(readErr), &d)
	var e *jsonstrict.Error
	if !errors.Is(err, readErr) || errors.As(err, &e) {
		t.Errorf("Decode of a failing reader = %v (%T), want the read error as it is", err, err)
	}
}

// FuzzUnmarshal: any input decodes or gives an *Error, never a panic.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"identity": {"eventId": "a", "millis": 1}, "headers": {"a": {}}, "name": "n"}`,
		`{"identity": {"eventId": "a", "eventId": "b"}}`,
		`{"identity": {"EventId": "a"}}`,
		`{"headers": {"k": {}, "k": {}}}`,
		`{"name": "\ud800"}`,
		`[1, 2]`,
		`{"name": 1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d document
		err := jsonstrict.Unmarshal(b, &d)
		var e *jsonstrict.Error
		if err != nil && (!errors.As(err, &e) || e.Error() == "") {
			t.Fatalf("err = %v (%T), want an *Error", err, err)
		}
	})
}
