package api_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/masking"
)

// A repair whose value or header value still holds the masked view's asterisks is a 422
// naming the field, and changes nothing; asterisks the original itself holds are no
// placeholders.
func TestRepairRefusesPlaceholders(t *testing.T) {
	t.Parallel()
	rules, err := masking.Parse(strings.NewReader("orders json /ssn\norders header authorization"), "test")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) { s.Core.Masking = rules })
	id := e.insert(row{Topic: "orders", Value: []byte(`{"ssn":"123-45-6789","stars":"***"}`),
		HeaderNames: []string{"authorization"}, HeaderValues: [][]byte{[]byte("Bearer xyz")}})
	path := "/api/v1/failures/" + id.String() + "/repair"
	before := e.checksum()
	for _, c := range []struct{ body, field string }{
		{`{"reason": "fix", "value_format": "json", "value": "{\"ssn\":\"***********\",\"stars\":\"***\"}"}`, "value"},
		{`{"reason": "fix", "headers": [{"name": "authorization", "value": "**********"}]}`, "headers[0].value"},
	} {
		r := e.do("POST", path, adminToken, c.body)
		if p := r.problem(t); r.status != 422 || p.Field != c.field || !strings.Contains(p.Detail, "asterisks") {
			t.Errorf("%s = %d %+v, want 422 naming %s", c.body, r.status, p, c.field)
		}
	}
	if e.checksum() != before {
		t.Fatal("a refused repair changed something")
	}
	r := e.do("POST", path, adminToken, `{"reason": "fix", "value_format": "json", "value": "{\"ssn\":\"123-45-6780\",\"stars\":\"***\"}"}`)
	if r.status != 200 {
		t.Errorf("a repair with the original's own asterisks = %d %s", r.status, r.body)
	}
}
