package api_test

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/auth"
)

func TestNewNeedsCoreAndAuth(t *testing.T) {
	t.Parallel()
	if _, err := api.New(api.Config{}); err == nil || !strings.Contains(err.Error(), "Core") || !strings.Contains(err.Error(), "Auth") {
		t.Errorf("New without core and auth = %v", err)
	}
}

// Every route but the OpenAPI document needs credentials; every mutating route needs the
// operator role; an operator and an admin may use them.
func TestRolesOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.insert(row{})
	var groupID int64
	e.pool.QueryRow(t.Context(), "SELECT min(id) FROM failure_groups").Scan(&groupID)

	routes, ok := e.handler.(chi.Routes)
	if !ok {
		t.Fatal("the handler is not a chi router")
	}
	var mutating int
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		path := strings.ReplaceAll(route, "{id}", id.String())
		if strings.HasPrefix(route, "/api/v1/groups/") {
			path = strings.ReplaceAll(route, "{id}", "1")
		}
		if route == "/api/v1/openapi.json" {
			if r := e.do(method, path, "", nil); r.status != 200 {
				t.Errorf("%s %s without credentials = %d, want 200", method, route, r.status)
			}
			return nil
		}
		for _, tc := range []struct {
			token  string
			header string
		}{{"", ""}, {"not-a-valid-token-at-all", ""}, {"", "Basic dXNlcjpwYXNz"}, {"", "Bearer"}} {
			r := doRequest(t, e.handler, method, path, tc.token, `{}`, func(r *http.Request) {
				if tc.header != "" {
					r.Header.Set("Authorization", tc.header)
				}
			})
			if r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with token %q header %q = %d, want 401 with WWW-Authenticate", method, route, tc.token, tc.header, r.status)
			} else {
				r.problem(t)
			}
		}
		if method == http.MethodGet {
			return nil
		}
		mutating++
		before := e.checksum()
		r := e.do(method, path, viewerToken, `{"reason": "x", "ids": ["`+id.String()+`"], "note": "n"}`)
		if r.status != 403 {
			t.Errorf("%s %s as viewer = %d, want 403", method, route, r.status)
		} else if p := r.problem(t); !strings.Contains(p.Detail, "operator") && !strings.Contains(p.Detail, "admin") {
			t.Errorf("%s %s as viewer: detail %q does not name the needed role", method, route, p.Detail)
		}
		// Admin-only mutations refuse operators too.
		if route == "/api/v1/dead-letters/reactivations" {
			if r := e.do(method, path, operatorToken, `{"up_to_now": true}`); r.status != 403 {
				t.Errorf("%s %s as operator = %d, want 403", method, route, r.status)
			}
		}
		if e.checksum() != before {
			t.Errorf("%s %s as viewer changed the database", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mutating != 15 {
		t.Errorf("checked %d mutating routes, want 15", mutating)
	}
	// The roles that may mutate do.
	if r := e.do("PATCH", "/api/v1/groups/"+itoa(groupID), operatorToken, `{"note": "by operator"}`); r.status != 200 {
		t.Errorf("PATCH as operator = %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/api/v1/groups/"+itoa(groupID), adminToken, `{"note": "by admin"}`); r.status != 200 {
		t.Errorf("PATCH as admin = %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/stats", viewerToken, nil); r.status != 200 {
		t.Errorf("GET /stats as viewer = %d", r.status)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestTrustedProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *setup) {
		s.Auth.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
		s.Auth.ProxyRoles = map[string]auth.Grant{"sre": {Role: auth.RoleOperator}, "staff": {Role: auth.RoleViewer}}
	})
	id := e.insert(row{})
	send := func(remote, user, groups, token string) *response {
		return doRequest(t, e.handler, "POST", "/api/v1/failures/"+id.String()+"/close", token, `{"reason": "via proxy"}`, func(r *http.Request) {
			r.RemoteAddr = remote
			if user != "" {
				r.Header.Set("X-Forwarded-User", user)
			}
			if groups != "" {
				r.Header.Set("X-Forwarded-Groups", groups)
			}
		})
	}
	// From an untrusted address the headers are ignored.
	if r := send("198.51.100.7:4000", "mallory", "sre", ""); r.status != 401 {
		t.Errorf("untrusted proxy = %d, want 401", r.status)
	}
	// A trusted proxy's user without a mapped group has no role.
	if r := send("192.0.2.10:4000", "guest", "others", ""); r.status != 403 {
		t.Errorf("user without role = %d, want 403", r.status)
	}
	if r := send("192.0.2.10:4000", "vic", "staff", ""); r.status != 403 {
		t.Errorf("viewer via proxy = %d, want 403", r.status)
	}
	// Bearer tokens still work through a trusted proxy without user headers.
	if r := doRequest(t, e.handler, "GET", "/api/v1/stats", viewerToken, nil, func(r *http.Request) { r.RemoteAddr = "192.0.2.10:1" }); r.status != 200 {
		t.Errorf("token through the proxy = %d", r.status)
	}
	// A trusted proxy's user that is empty once cleaned is refused: 401, never a principal "".
	for _, user := range []string{"\xff", "\x01\x7f", "\u202e"} {
		before := e.checksum()
		if r := send("192.0.2.10:4000", user, "sre", ""); r.status != 401 {
			t.Errorf("proxy user %q = %d %s, want 401", user, r.status, r.body)
		}
		if e.checksum() != before {
			t.Errorf("proxy user %q changed something", user)
		}
	}
	if r := send("192.0.2.10:4000", "sam@example.com", "staff, sre", ""); r.status != 200 {
		t.Fatalf("operator via proxy = %d %s", r.status, r.body)
	}
	var by string
	if err := e.pool.QueryRow(t.Context(), "SELECT principal FROM audit_log WHERE action = 'close'").Scan(&by); err != nil || by != "proxy:sam@example.com" {
		t.Errorf("audit principal = %q (%v)", by, err)
	}
}

func TestInsecureNoAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *setup) { s.Auth = auth.Config{InsecureNoAuth: true} })
	id := e.insert(row{})
	if r := e.do("POST", "/api/v1/failures/"+id.String()+"/close", "", `{"reason": "demo"}`); r.status != 200 {
		t.Fatalf("close without auth = %d %s", r.status, r.body)
	}
	var by string
	if err := e.pool.QueryRow(t.Context(), "SELECT closed_by FROM failures WHERE id = $1", id).Scan(&by); err != nil || by != "anonymous" {
		t.Errorf("closed_by = %q (%v)", by, err)
	}
}
