package api_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/store"
)

func TestParseTokens(t *testing.T) {
	t.Parallel()
	tokens, err := api.ParseTokens(" alice:operator:0123456789abcdef , bob:VIEWER:" + api.HashToken("bob-secret") + "\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0].Name != "alice" || tokens[0].Role != api.RoleOperator || tokens[1].Role != api.RoleViewer {
		t.Fatalf("tokens = %+v", tokens)
	}
	if none, err := api.ParseTokens(""); err != nil || len(none) != 0 {
		t.Errorf("empty spec = %v, %v", none, err)
	}
	for _, bad := range []string{
		"alice:operator",                                     // no secret
		"alice:root:0123456789abcdef",                        // unknown role
		"alice:admin:short",                                  // weak secret
		"al ice:admin:0123456789abcdef",                      // bad name
		"bob:admin:sha256:abc",                               // bad hash
		"a:admin:0123456789abcdef,a:viewer:fedcba9876543210", // duplicate name
		"a:admin:0123456789abcdef,b:viewer:0123456789abcdef", // duplicate secret
	} {
		if _, err := api.ParseTokens(bad); err == nil {
			t.Errorf("ParseTokens(%q) succeeded", bad)
		}
	}
}

func TestLoadTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	content := "# redrive API tokens\nci:operator:" + api.HashToken("ci-token-0123456789") + "\n\n  ops:admin:ops-token-0123456789\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := api.LoadTokenFile(path)
	if err != nil || len(tokens) != 2 || tokens[1].Name != "ops" {
		t.Fatalf("LoadTokenFile = %+v, %v", tokens, err)
	}
	if err := os.WriteFile(path, []byte("ok:viewer:0123456789abcdef\nbroken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := api.LoadTokenFile(path); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("LoadTokenFile(broken) = %v, want an error naming line 2", err)
	}
	if _, err := api.LoadTokenFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadTokenFile(missing) succeeded")
	}
}

func TestConfigValidateNeedsAuth(t *testing.T) {
	t.Parallel()
	s := &store.Store{}
	cfg := api.Config{Store: s}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "--insecure-no-auth") {
		t.Errorf("Validate without auth = %v, want an error naming --insecure-no-auth", err)
	}
	cfg.Auth.InsecureNoAuth = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with InsecureNoAuth = %v", err)
	}
	cfg = api.Config{Store: s, Auth: api.AuthConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with trusted proxies = %v", err)
	}
	if err := (&api.Config{Auth: api.AuthConfig{InsecureNoAuth: true}}).Validate(); err == nil {
		t.Error("Validate without a store succeeded")
	}
	if _, err := api.New(api.Config{Store: s}); err == nil {
		t.Error("New without auth succeeded")
	}
}

func TestParseProxyConfig(t *testing.T) {
	t.Parallel()
	ps, err := api.ParseTrustedProxies(" 10.0.0.5, 10.1.0.0/16,::1,::ffff:192.0.2.1")
	if err != nil || len(ps) != 4 || ps[0].Bits() != 32 || ps[3].Addr().Is6() {
		t.Errorf("ParseTrustedProxies = %v, %v", ps, err)
	}
	if _, err := api.ParseTrustedProxies("10.0.0.300"); err == nil {
		t.Error("bad address accepted")
	}
	if _, err := api.ParseTrustedProxies("10.0.0.0/33"); err == nil {
		t.Error("bad prefix accepted")
	}
	roles, err := api.ParseProxyRoles("redrive-admins=admin, sre = operator,staff=viewer")
	if err != nil || roles["sre"] != api.RoleOperator || roles["redrive-admins"] != api.RoleAdmin || len(roles) != 3 {
		t.Errorf("ParseProxyRoles = %v, %v", roles, err)
	}
	for _, bad := range []string{"sre", "=admin", "sre=boss", "a=admin,a=viewer"} {
		if _, err := api.ParseProxyRoles(bad); err == nil {
			t.Errorf("ParseProxyRoles(%q) succeeded", bad)
		}
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
		} else if p := r.problem(t); !strings.Contains(p.Detail, "operator") {
			t.Errorf("%s %s as viewer: detail %q does not name the needed role", method, route, p.Detail)
		}
		if e.checksum() != before {
			t.Errorf("%s %s as viewer changed the database", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mutating != 5 {
		t.Errorf("checked %d mutating routes, want 5", mutating)
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
	e := newEnv(t, func(c *api.Config) {
		c.Auth.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
		c.Auth.ProxyRoles = map[string]api.Role{"sre": api.RoleOperator, "staff": api.RoleViewer}
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
	if r := send("192.0.2.10:4000", "sam@example.com", "staff, sre", ""); r.status != 200 {
		t.Fatalf("operator via proxy = %d %s", r.status, r.body)
	}
	var by string
	if err := e.pool.QueryRow(t.Context(), "SELECT principal FROM audit_log WHERE action = 'close'").Scan(&by); err != nil || by != "sam@example.com" {
		t.Errorf("audit principal = %q (%v)", by, err)
	}
}

func TestInsecureNoAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.Auth = api.AuthConfig{InsecureNoAuth: true} })
	id := e.insert(row{})
	if r := e.do("POST", "/api/v1/failures/"+id.String()+"/close", "", `{"reason": "demo"}`); r.status != 200 {
		t.Fatalf("close without auth = %d %s", r.status, r.body)
	}
	var by string
	if err := e.pool.QueryRow(t.Context(), "SELECT closed_by FROM failures WHERE id = $1", id).Scan(&by); err != nil || by != "anonymous" {
		t.Errorf("closed_by = %q (%v)", by, err)
	}
}

// The middleware and the principal lookup serve other handlers too.
func TestAuthenticatorForOtherHandlers(t *testing.T) {
	t.Parallel()
	a, err := api.NewAuthenticator(api.AuthConfig{Tokens: testTokens(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Middleware(api.RequireRole(api.RoleOperator)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := api.PrincipalFrom(r.Context())
		if !ok {
			t.Error("no principal")
		}
		w.Write([]byte(p.Name + " " + p.Role.String() + " " + p.Method))
	})))
	for token, want := range map[string]string{operatorToken: "200 otto operator token", adminToken: "200 ada admin token", viewerToken: "403", "": "401"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/ui", nil)
		if token != "" {
			req.Header.Set("Authorization", "bearer "+token)
		}
		h.ServeHTTP(rec, req)
		got := strings.TrimSpace(itoa(int64(rec.Code)) + " " + rec.Body.String())
		if rec.Code != 200 {
			got = itoa(int64(rec.Code))
		}
		if got != want {
			t.Errorf("token %q: %q, want %q", token, got, want)
		}
	}
	if r, err := api.ParseRole("Operator"); err != nil || r != api.RoleOperator || !r.Allows(api.RoleViewer) || r.Allows(api.RoleAdmin) {
		t.Errorf("ParseRole/Allows: %v %v", r, err)
	}
}
