package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/operator"
)

// The OpenAPI document lists exactly the routes the router serves.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Servers []struct{ URL string }                `json:"servers"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") || len(doc.Servers) != 1 || doc.Servers[0].URL != api.Prefix {
		t.Fatalf("openapi %q servers %+v", doc.OpenAPI, doc.Servers)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	e := newEnv(t, nil)
	var routed []string
	err := chi.Walk(e.handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		path, ok := strings.CutPrefix(route, api.Prefix)
		if !ok {
			t.Errorf("route %s is outside %s", route, api.Prefix)
		}
		routed = append(routed, method+" "+path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(documented)
	slices.Sort(routed)
	for _, r := range routed {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routed, d) {
			t.Errorf("openapi.json documents %s, which is not routed", d)
		}
	}
	if len(routed) != 32 {
		t.Errorf("%d routes: %v", len(routed), routed)
	}
	// Served as it is embedded, without credentials.
	r := e.do("GET", "/api/v1/openapi.json", "", nil)
	if r.status != 200 || string(r.body) != string(api.OpenAPI()) {
		t.Errorf("GET /openapi.json = %d", r.status)
	}
}

// Every query parameter the list accepts is documented, and no other.
func TestOpenAPIListParameters(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name string `json:"name"`
				Ref  string `json:"$ref"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range doc.Paths["/failures"]["get"].Parameters {
		switch p.Ref {
		case "#/components/parameters/Limit":
			names = append(names, "limit")
		case "#/components/parameters/Cursor":
			names = append(names, "cursor")
		default:
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	want := append([]string{"cursor", "limit", "sort", "total"}, operator.FilterParams...)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("documented list parameters %v, want %v", names, want)
	}
	// Each is accepted.
	e := newEnv(t, nil)
	for _, n := range want {
		if r := e.do("GET", "/api/v1/failures?"+n+"=", viewerToken, nil); r.status != 200 {
			t.Errorf("parameter %s: %d %s", n, r.status, r.body)
		}
	}
}
