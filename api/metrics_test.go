package api_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/api"
)

// Requests are counted by route pattern, not path; two handlers may share one registry.
func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(s *setup) { s.API.Registerer, s.Core.Registerer = reg, reg })
	if _, err := api.New(api.Config{Core: e.core, Auth: e.auth, Registerer: reg}); err != nil {
		t.Fatalf("second handler on the same registry: %v", err)
	}
	id := e.insert(row{})
	e.do("GET", "/api/v1/failures/"+id.String(), viewerToken, nil)
	e.do("GET", "/api/v1/failures/not-a-uuid", viewerToken, nil)
	e.do("POST", "/api/v1/failures/"+id.String()+"/close", operatorToken, `{"reason": "r"}`)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "redrive_api_requests_total" {
			continue
		}
		for _, m := range mf.Metric {
			var s string
			for _, l := range m.Label {
				s += l.GetName() + "=" + l.GetValue() + " "
			}
			labels[s] = true
		}
	}
	for _, want := range []string{
		"code=200 method=GET route=/api/v1/failures/{id} ",
		"code=400 method=GET route=/api/v1/failures/{id} ",
		"code=200 method=POST route=/api/v1/failures/{id}/close ",
	} {
		if !labels[want] {
			t.Errorf("no series %q in %v", want, labels)
		}
	}
	if n := testutil.CollectAndCount(reg, "redrive_operator_action_items_total"); n != 1 {
		t.Errorf("%d action series, want 1", n)
	}
}
