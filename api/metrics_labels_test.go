package api_test

import (
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/api"
)

// Unauthenticated requests with made-up methods and paths add no series beyond a fixed set:
// every label of the request metrics takes a bounded set of values.
func TestMetricsLabelsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(s *setup) { s.NoResender, s.API.Registerer = true, reg })
	h := e.handler
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet string) string {
		b := make([]byte, 1+rnd.IntN(12))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(b)
	}
	const upper, lower = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz0123456789-_."
	methods := []string{"GET", "POST", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	for i := range 3000 {
		method := methods[rnd.IntN(len(methods))]
		if i%2 == 0 {
			method = word(upper)
		}
		var path string
		switch i % 5 {
		case 0:
			path = "/api/v1/failures/" + word(lower)
		case 1:
			path = "/api/v1/" + word(lower) + "/" + word(lower)
		case 2:
			path = "/" + word(lower)
		case 3:
			path = "/api/v1/groups/" + word(lower)
		default:
			path = "/api/v1/failures/" + word(lower) + "/" + word(lower)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader("{}")))
	}

	// The routes of the API (under 20), nine standard methods and "other", a handful of codes
	// (401, 404, 405): far below the thousands of distinct methods and paths sent.
	const bound = 200
	for _, name := range []string{"redrive_api_requests_total", "redrive_api_request_duration_seconds"} {
		if n := testutil.CollectAndCount(reg, name); n == 0 || n > bound {
			t.Errorf("%s has %d series, want 1 to %d", name, n, bound)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "redrive_api_requests_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if values[l.GetName()] == nil {
					values[l.GetName()] = map[string]bool{}
				}
				values[l.GetName()][l.GetValue()] = true
			}
		}
	}
	for label, want := range map[string]string{"method": "other", "route": "unmatched"} {
		if !values[label][want] {
			t.Errorf("no series with %s=%q among %d values", label, want, len(values[label]))
		}
	}
	for route := range values["route"] {
		if route != "unmatched" && !strings.HasPrefix(route, api.Prefix+"/") {
			t.Errorf("route label %q is neither a route pattern nor unmatched", route)
		}
		if strings.ContainsAny(route, "0123456789") && !strings.Contains(route, "v1") {
			t.Errorf("route label %q holds a path, not a pattern", route)
		}
	}
	if len(values["method"]) > 10 {
		t.Errorf("%d method label values, want at most the nine standard methods and other", len(values["method"]))
	}
}
