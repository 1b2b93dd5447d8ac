package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// An imported record that the intake would refuse (a NUL in a text, a 10,000-character topic)
// or that was exported masked is a 400 naming its line and field, never a 500; nothing of the
// file is stored.
func TestImportRefusesWhatTheIntakeWould(t *testing.T) {
	t.Parallel()
	src := newEnv(t, func(s *setup) { s.NoResender = true })
	for range 2 {
		src.insert(row{})
	}
	file := string(src.do("GET", "/api/v1/failures/export", viewerToken, nil).body)
	lines := strings.Split(strings.TrimSpace(file), "\n")
	dst := newEnv(t, func(s *setup) { s.NoResender = true })
	for name, c := range map[string]struct{ old, new, field string }{
		"NUL in the error message": {`"error_message":"`, `"error_message":"\u0000`, "error_message"},
		"10,000-character topic":   {`"topic":"`, `"topic":"` + strings.Repeat("t", 10000), "topic"},
		"masked":                   {`"format":`, `"masked":true,"format":`, "masked"},
	} {
		body := lines[0] + "\n" + strings.Replace(lines[1], c.old, c.new, 1) + "\n"
		r := doRequest(t, dst.handler, "POST", "/api/v1/failures/import", adminToken, []byte(body), func(r *http.Request) {
			r.Header.Set("Content-Type", "application/x-ndjson")
		})
		if p := r.problem(t); r.status != 400 || p.Field != "line 2" || !strings.Contains(p.Detail, c.field) {
			t.Errorf("%s: %d %+v, want 400 on line 2 naming %s", name, r.status, p, c.field)
		}
	}
	if again := dst.do("GET", "/api/v1/failures/export", viewerToken, nil); len(again.body) != 0 {
		t.Errorf("a refused import stored %q", again.body)
	}
}
