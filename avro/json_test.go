package avro_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/jsonstrict"
)

// strictJSONCases are event documents that differ from a valid vector by a member name: each
// is refused with an error that names the member and where it is.
func strictJSONCases(t testing.TB) []struct{ name, doc, want string } {
	b, err := os.ReadFile(filepath.Join(vectorDir, "temporary-with-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	valid := string(b)
	replace := func(old, new string) string {
		if !strings.Contains(valid, old) {
			t.Fatalf("the vector has no %q", old)
		}
		return strings.Replace(valid, old, new, 1)
	}
	return []struct{ name, doc, want string }{
		{"duplicate nested member", replace(`"eventId": "7d2c`, `"eventId": "00000000-0000-4000-8000-000000000000", "eventId": "7d2c`),
			`member "eventId" appears twice in object "/identity"`},
		{"duplicate top-level member", replace(`"processId"`, `"processId": "first", "processId"`),
			`member "processId" appears twice in the top-level object`},
		{"duplicate object", replace(`"publisher": {`, `"publisher": {"system": "a", "service": "b"}, "publisher": {`),
			`member "publisher" appears twice in the top-level object`},
		{"duplicate header", replace(`"empty": {`, `"traceparent": {"base64": ""}, "empty": {`),
			`member "traceparent" appears twice in object "/payload/failedMessageMetadata/headers"`},
		{"name in another case", replace(`"eventId": "7d2c`, `"EventId": "7d2c`),
			`unknown member "EventId" in object "/identity"`},
		{"name in lower case", replace(`"errorMessage"`, `"errormessage"`),
			`unknown member "errormessage" in object "/payload"`},
		{"top-level name in upper case", replace(`"identity"`, `"IDENTITY"`),
			`unknown member "IDENTITY" in the top-level object`},
		{"unknown member", replace(`"code": "DB_UNAVAILABLE"`, `"code": "DB_UNAVAILABLE", "severity": "high"`),
			`unknown member "severity" in object "/references/errorType"`},
		{"trailing value", valid + ` {}`, `after top-level value`},
	}
}

func TestParseEventJSONStrictNames(t *testing.T) {
	t.Parallel()
	for _, c := range strictJSONCases(t) {
		_, err := avro.ParseEventJSON([]byte(c.doc))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		var je *jsonstrict.Error
		if !errors.As(err, &je) {
			t.Errorf("%s: %v is not a *jsonstrict.Error", c.name, err)
		}
		if !strings.HasPrefix(err.Error(), "event JSON: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q does not say %q", c.name, err.Error(), c.want)
		}
	}
}
