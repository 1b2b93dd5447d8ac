package operator_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/operator"
)

func TestParseFilter(t *testing.T) {
	t.Parallel()
	f, err := operator.ParseFilter(url.Values{
		"state":        {"permanent,RETRY_PENDING", "PERMANENT"},
		"temporality":  {"temporary"},
		"topic":        {" orders "},
		"group_id":     {"7"},
		"key_base64":   {"AP8="},
		"created_from": {"2024-05-01T12:00"},
		"created_to":   {"2024-05-02T00:00:00+02:00"},
		"unrelated":    {"ignored"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := redrive.Filter{States: []redrive.State{redrive.StatePermanent, redrive.StateRetryPending},
		Temporalities: []avro.Temporality{avro.Temporary}, Topic: "orders", GroupID: 7, Key: []byte{0, 0xff},
		CreatedFrom: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), CreatedTo: time.Date(2024, 5, 1, 22, 0, 0, 0, time.UTC)}
	if operator.FilterValues(f).Encode() != operator.FilterValues(want).Encode() {
		t.Errorf("ParseFilter = %+v, want %+v", f, want)
	}
	for q, field := range map[string]string{
		"state=OPEN":             "state",
		"temporality=x":          "temporality",
		"group_id=0":             "group_id",
		"group_id=1e3":           "group_id",
		"key=a&key_base64=YQ==":  "key_base64",
		"key_base64=***":         "key_base64",
		"created_from=yesterday": "created_from",
		"created_from=2024-06-02&created_to=2024-06-01": "created_to",
		"q=" + strings.Repeat("x", 201):                 "q",
		"topic=%ff":                                     "topic",
	} {
		v, _ := url.ParseQuery(q)
		_, err := operator.ParseFilter(v)
		ie, ok := err.(*operator.InputError)
		if !ok || ie.Field != field {
			t.Errorf("%s: %v, want an input error on %s", q, err, field)
		}
	}
}

// JSON and query strings follow one set of rules.
func TestFilterInput(t *testing.T) {
	t.Parallel()
	var in operator.FilterInput
	if err := json.Unmarshal([]byte(`{"state": ["PERMANENT"], "temporality": "unknown,temporary", "group_id": 3, "key": "k-1"}`), &in); err != nil {
		t.Fatal(err)
	}
	f, err := in.Filter()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.States) != 1 || len(f.Temporalities) != 2 || f.GroupID != 3 || string(f.Key) != "k-1" {
		t.Errorf("Filter = %+v", f)
	}
	for body, field := range map[string]string{
		`{"state": "DONE"}`:                  "state",
		`{"group_id": -1}`:                   "group_id",
		`{"key": "a", "key_base64": "YQ=="}`: "key_base64",
		`{"key": ""}`:                        "key",
	} {
		var in operator.FilterInput
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		_, err := in.Filter()
		if ie, ok := err.(*operator.InputError); !ok || ie.Field != field {
			t.Errorf("%s: %v, want an input error on %s", body, err, field)
		}
	}
	var bad operator.FilterInput
	if err := json.Unmarshal([]byte(`{"state": 3}`), &bad); err == nil {
		t.Error(`{"state": 3} decoded`)
	}
}

// A key that is not printable text round-trips through key_base64.
func TestFilterValuesKeys(t *testing.T) {
	t.Parallel()
	for _, key := range [][]byte{[]byte("plain"), {0xff, 0}, []byte("a\u202eb"), []byte(" padded "), {}} {
		v := operator.FilterValues(redrive.Filter{Key: key})
		f, err := operator.ParseFilter(v)
		if len(key) == 0 {
			// An empty key cannot be written in a query: both forms read as absent.
			continue
		}
		if err != nil || string(f.Key) != string(key) {
			t.Errorf("key %q: %v -> %q, %v", key, v, f.Key, err)
		}
	}
}
