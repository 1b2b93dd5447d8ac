package auth_test

import (
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redrive/redrive/auth"
)

const (
	viewerToken   = "viewer-token-0123456789"
	operatorToken = "operator-token-0123456789"
	adminToken    = "admin-token-0123456789"
)

func testTokens(t testing.TB) []auth.Token {
	t.Helper()
	tokens, err := auth.ParseTokens("vera:viewer:" + viewerToken + ",otto:operator:" + operatorToken + "\nada:admin:" + auth.HashToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(" alice:operator:0123456789abcdef , bob:VIEWER:" + auth.HashToken("bob-secret") + "\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0].Name != "alice" || tokens[0].Role != auth.RoleOperator || tokens[1].Role != auth.RoleViewer {
		t.Fatalf("tokens = %+v", tokens)
	}
	if none, err := auth.ParseTokens(""); err != nil || len(none) != 0 {
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
		if _, err := auth.ParseTokens(bad); err == nil {
			t.Errorf("ParseTokens(%q) succeeded", bad)
		}
	}
}

func TestLoadTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	content := "# redrive API tokens\nci:operator:" + auth.HashToken("ci-token-0123456789") + "\n\n  ops:admin:ops-token-0123456789\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.LoadTokenFile(path)
	if err != nil || len(tokens) != 2 || tokens[1].Name != "ops" {
		t.Fatalf("LoadTokenFile = %+v, %v", tokens, err)
	}
	if err := os.WriteFile(path, []byte("ok:viewer:0123456789abcdef\nbroken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadTokenFile(path); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("LoadTokenFile(broken) = %v, want an error naming line 2", err)
	}
	if _, err := auth.LoadTokenFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadTokenFile(missing) succeeded")
	}
}

func TestParseProxyConfig(t *testing.T) {
	t.Parallel()
	ps, err := auth.ParseTrustedProxies(" 10.0.0.5, 10.1.0.0/16,::1,::ffff:192.0.2.1")
	if err != nil || len(ps) != 4 || ps[0].Bits() != 32 || ps[3].Addr().Is6() {
		t.Errorf("ParseTrustedProxies = %v, %v", ps, err)
	}
	if _, err := auth.ParseTrustedProxies("10.0.0.300"); err == nil {
		t.Error("bad address accepted")
	}
	if _, err := auth.ParseTrustedProxies("10.0.0.0/33"); err == nil {
		t.Error("bad prefix accepted")
	}
	roles, err := auth.ParseProxyRoles("redrive-admins=admin, sre = operator,staff=viewer")
	if err != nil || roles["sre"].Role != auth.RoleOperator || roles["redrive-admins"].Role != auth.RoleAdmin || len(roles) != 3 {
		t.Errorf("ParseProxyRoles = %v, %v", roles, err)
	}
	for _, bad := range []string{"sre", "=admin", "sre=boss", "a=admin,a=viewer"} {
		if _, err := auth.ParseProxyRoles(bad); err == nil {
			t.Errorf("ParseProxyRoles(%q) succeeded", bad)
		}
	}
}

func TestConfigValidateNeedsAuth(t *testing.T) {
	t.Parallel()
	var cfg auth.Config
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--insecure-no-auth") {
		t.Errorf("Validate without auth = %v, want an error naming --insecure-no-auth", err)
	}
	cfg.InsecureNoAuth = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with InsecureNoAuth = %v", err)
	}
	cfg = auth.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with trusted proxies = %v", err)
	}
	if _, err := auth.NewAuthenticator(auth.Config{}); err == nil {
		t.Error("NewAuthenticator without auth succeeded")
	}
}

// Tokens, the trusted proxy and the anonymous admin, as the API and the UI use them.
func TestAuthenticator(t *testing.T) {
	t.Parallel()
	a, err := auth.NewAuthenticator(auth.Config{Tokens: testTokens(t),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		ProxyRoles:     map[string]auth.Grant{"sre": {Role: auth.RoleOperator}}})
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{
		"Bearer " + operatorToken:      "token:otto operator token",
		"bearer " + adminToken:         "token:ada admin token",
		"Bearer " + viewerToken:        "token:vera viewer token",
		"":                             "no bearer token",
		"Bearer":                       "not \"Bearer <token>\"",
		"Basic dXNlcjpwYXNz":           "not \"Bearer <token>\"",
		"Bearer wrong-token-000000000": "unknown token",
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "198.51.100.1:1"
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		p, err := a.Authenticate(req)
		got := p.Name + " " + p.Role.String() + " " + p.Method
		if err != nil {
			if !strings.HasPrefix(err.Error(), auth.ErrUnauthenticated.Error()) {
				t.Errorf("%q: error %v does not wrap ErrUnauthenticated", header, err)
			}
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("%q: %q, want %q", header, got, want)
		}
	}
	if p, err := a.Token("  " + operatorToken + " "); err != nil || p.Name != "token:otto" || p.DisplayName() != "otto" {
		t.Errorf("Token = %+v, %v", p, err)
	}
	if _, err := a.Token(""); err == nil {
		t.Error("an empty token was accepted")
	}
	if r, err := auth.ParseRole("Operator"); err != nil || r != auth.RoleOperator || !r.Allows(auth.RoleViewer) || r.Allows(auth.RoleAdmin) {
		t.Errorf("ParseRole/Allows: %v %v", r, err)
	}
}

// A trusted proxy's user header that is empty once cleaned is refused, never a principal "".
func TestProxyIdentityMustNameSomeone(t *testing.T) {
	t.Parallel()
	a, err := auth.NewAuthenticator(auth.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		ProxyRoles: map[string]auth.Grant{"sre": {Role: auth.RoleOperator}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"\xff", "\x01\x02", " \t ", "\u202e\u200b", "\xff\xfe\x7f"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "192.0.2.9:1"
		req.Header.Set("X-Forwarded-User", user)
		req.Header.Set("X-Forwarded-Groups", "sre")
		p, ok, err := a.Ambient(req)
		if err == nil || !ok || p.Name != "" {
			t.Errorf("user %q: Ambient = %+v, %v, %v, want an error", user, p, ok, err)
		}
		if _, err := a.Authenticate(req); err == nil || !strings.HasPrefix(err.Error(), auth.ErrUnauthenticated.Error()) {
			t.Errorf("user %q: Authenticate = %v", user, err)
		}
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "192.0.2.9:1"
	req.Header.Set("X-Forwarded-User", "  sam\u202e@example.com\x00 ")
	req.Header.Set("X-Forwarded-Groups", "sre")
	if p, ok, err := a.Ambient(req); err != nil || !ok || p.Name != "proxy:sam@example.com" || p.Display != "sam@example.com" || p.Role != auth.RoleOperator {
		t.Errorf("cleaned user = %+v, %v, %v", p, ok, err)
	}
	// The same headers from an untrusted address count for nothing.
	req.RemoteAddr = "198.51.100.1:1"
	if _, ok, err := a.Ambient(req); ok || err != nil {
		t.Errorf("untrusted address: ok %v, %v", ok, err)
	}
}

// The payload permission: granted with "+payload" by tokens and mappings, implied by admin.
func TestPayloadGrant(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]auth.Grant{
		"viewer":           {Role: auth.RoleViewer},
		"viewer+payload":   {Role: auth.RoleViewer, Payload: true},
		"Operator+PAYLOAD": {Role: auth.RoleOperator, Payload: true},
		"admin":            {Role: auth.RoleAdmin, Payload: true},
	} {
		if g, err := auth.ParseGrant(in); err != nil || g != want {
			t.Errorf("ParseGrant(%q) = %+v, %v", in, g, err)
		}
	}
	for _, bad := range []string{"viewer+x", "root+payload", "+payload", "viewer+"} {
		if _, err := auth.ParseGrant(bad); err == nil {
			t.Errorf("ParseGrant(%q) succeeded", bad)
		}
	}
	tokens, err := auth.ParseTokens("v:viewer:" + viewerToken + ",p:viewer+payload:" + operatorToken + ",a:admin:" + adminToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	for secret, want := range map[string]bool{viewerToken: false, operatorToken: true, adminToken: true} {
		if p, err := a.Token(secret); err != nil || p.CanReadPayload() != want {
			t.Errorf("token %s: %+v, %v, want payload %v", secret, p, err, want)
		}
	}
	roles, err := auth.ParseProxyRoles("staff=viewer,sre=viewer+payload")
	if err != nil {
		t.Fatal(err)
	}
	pa, err := auth.NewAuthenticator(auth.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, ProxyRoles: roles})
	if err != nil {
		t.Fatal(err)
	}
	for groups, want := range map[string]bool{"staff": false, "staff,sre": true} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		r.Header.Set("X-Forwarded-User", "u")
		r.Header.Set("X-Forwarded-Groups", groups)
		if p, err := pa.Authenticate(r); err != nil || p.CanReadPayload() != want || p.Role != auth.RoleViewer {
			t.Errorf("groups %s: %+v, %v", groups, p, err)
		}
	}
}
