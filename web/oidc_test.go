package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
)

// oidcFixture is the fixture's UI with OIDC sign-in against an in-process provider, whose
// user alice (sub user-1) is in the group redrive-operators (operator with the payload
// permission); redrive-viewers maps to viewer. The UI's clock can be moved forward.
type oidcFixture struct {
	*fixture
	provider *testkit.OIDCProvider
	handler  *handler
	// base is the UI's address as a browser uses it: http://localhost:port, another site than
	// the provider's http://127.0.0.1:port, so that the provider's redirect is cross-site.
	base string
	// skew moves the UI's clock forward (nanoseconds).
	skew atomic.Int64
}

// oidcSessionKey is the fixture's session key.
var oidcSessionKey = bytes.Repeat([]byte{7}, 32)

func newOIDCFixture(t *testing.T, maxAge time.Duration) *oidcFixture {
	t.Helper()
	f := &oidcFixture{fixture: newFixture(t), provider: testkit.NewOIDCProvider(t)}
	srv := httptest.NewUnstartedServer(nil)
	f.base = fmt.Sprintf("http://localhost:%d", srv.Listener.Addr().(*net.TCPAddr).Port)
	roles, err := auth.ParseProxyRoles("redrive-operators=operator+payload,redrive-viewers=viewer")
	if err != nil {
		t.Fatal(err)
	}
	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: f.provider.Issuer(), ClientID: f.provider.ClientID,
		ClientSecret: f.provider.Secret, RedirectURL: f.base + "/auth/callback", RoleMapping: roles})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokens("olivia:operator+payload:" + operatorToken + ",victor:viewer+payload:" + viewerToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens, OIDC: o,
		TrustedProxies:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		ProxyDefaultRole: auth.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Core: f.core, Auth: a, Logger: quiet, PageSize: 2, SessionKey: oidcSessionKey,
		OIDC: o, OIDCName: "Testkit ID", OIDCSessionMaxAge: maxAge,
		Now: func() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	f.handler = h.(*handler)
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	f.fixture.handler, f.fixture.srv = h, srv
	return f
}

// startSignIn runs GET /auth/login?next=… and the provider's authorization endpoint with c,
// and returns the query the provider sends back to the callback (code and state).
func (f *oidcFixture) startSignIn(c *client, next string) url.Values {
	f.t.Helper()
	resp, body := c.do("GET", "/auth/login?next="+url.QueryEscape(next), nil)
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("/auth/login: %d %s", resp.StatusCode, body)
	}
	ck := cookieNamed(resp, signInCookie)
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != signInPath || ck.MaxAge != 600 {
		f.t.Fatalf("sign-in cookie = %+v", ck)
	}
	authorize, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(authorize.String(), f.provider.Issuer()+"/authorize?") {
		f.t.Fatalf("/auth/login redirects to %q", resp.Header.Get("Location"))
	}
	state := authorize.Query().Get("state")
	raw, _ := base64.RawURLEncoding.DecodeString(ck.Value)
	if state == "" || strings.Contains(ck.Value, state) || bytes.Contains(raw, []byte(state)) {
		f.t.Fatal("the sign-in cookie shows its state in the clear")
	}
	resp, err = c.c.Get(authorize.String())
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || back.Path != "/auth/callback" {
		f.t.Fatalf("the provider answers %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back.Query()
}

// callback sends the provider's answer q to the UI's callback.
func (f *oidcFixture) callback(c *client, q url.Values) (*http.Response, string) {
	f.t.Helper()
	return c.do("GET", "/auth/callback?"+q.Encode(), nil)
}

// signIn signs c in with OIDC and returns the session cookie.
func (f *oidcFixture) signIn(c *client) *http.Cookie {
	f.t.Helper()
	resp, body := f.callback(c, f.startSignIn(c, "/failures"))
	ck := cookieNamed(resp, oidcSessionCookie)
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		f.t.Fatalf("callback: %d %s", resp.StatusCode, body)
	}
	return ck
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, ck := range resp.Cookies() {
		if ck.Name == name {
			return ck
		}
	}
	return nil
}

// setCookie puts a cookie for the UI into c's jar, or removes it when value is "".
func (f *oidcFixture) setCookie(c *client, name, path, value string) {
	u, _ := url.Parse(f.srv.URL)
	ck := &http.Cookie{Name: name, Value: value, Path: path}
	if value == "" {
		ck.MaxAge = -1
	}
	c.c.Jar.SetCookies(u, []*http.Cookie{ck})
}

func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	c := f.client()

	resp, body := c.do("GET", "/login?next=%2Ffailures", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `href="/auth/login?next=%2ffailures">Sign in with Testkit ID</a>`) ||
		!strings.Contains(body, `name="token"`) {
		t.Fatalf("login page: %d %s", resp.StatusCode, body)
	}

	q := f.startSignIn(c, "/failures?state=PERMANENT")
	resp, body = f.callback(c, q)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/failures?state=PERMANENT" {
		t.Fatalf("callback: %d, Location %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	ck := cookieNamed(resp, oidcSessionCookie)
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" ||
		ck.MaxAge < 3500 || ck.MaxAge > 3600 || strings.Contains(ck.Value, "alice") {
		t.Fatalf("session cookie = %+v, want sealed, HttpOnly, Lax, until the ID token expires in an hour", ck)
	}
	if gone := cookieNamed(resp, signInCookie); gone == nil || gone.MaxAge >= 0 {
		t.Fatalf("the callback keeps the sign-in cookie: %+v", gone)
	}

	resp, body = c.do("GET", "/failures", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="principal">alice (user-1)<`) ||
		!strings.Contains(body, `id="role">operator<`) || !strings.Contains(body, `id="bulk-close"`) {
		t.Fatalf("failures after sign-in: %d %s", resp.StatusCode, body)
	}
	// The payload permission of the group survives in the session.
	if resp, raw := c.do("GET", "/failures/"+f.ids[2].String()+"/key", nil); resp.StatusCode != 200 || raw != "key-shipments" {
		t.Fatalf("payload download: %d %q", resp.StatusCode, raw)
	}
	// The audit log names the user as auth does: "display (sub)".
	tok := csrfRE.FindStringSubmatch(body)[1]
	resp, body = c.act("/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"sso close"}})
	if resp.StatusCode != 200 {
		t.Fatalf("close: %d %s", resp.StatusCode, body)
	}
	var who string
	if err := f.pool.QueryRow(context.Background(), `SELECT principal FROM audit_log WHERE reason = 'sso close'`).Scan(&who); err != nil || who != "alice (user-1)" {
		t.Fatalf("audit principal %q (%v), want alice (user-1)", who, err)
	}

	// The provider's answer is good for one sign-in only.
	if resp, _ := f.callback(f.client(), q); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("replayed callback: %d", resp.StatusCode)
	}

	// Signing out ends the provider's session too (RP-initiated logout), which sends the
	// browser back to the sign-in page.
	resp, body = c.do("POST", "/logout", url.Values{"csrf": {tok}})
	if gone := cookieNamed(resp, oidcSessionCookie); resp.StatusCode != http.StatusOK || gone == nil || gone.MaxAge >= 0 {
		t.Fatalf("logout: %d, session cookie %+v", resp.StatusCode, gone)
	}
	// The page sends the browser on (a form's answer may not redirect to another site under
	// form-action 'self'): a refresh and a link, both to the provider's end-session address.
	link := regexp.MustCompile(`<a href="([^"]+)" id="provider-sign-out">Sign out at Testkit ID</a>`).FindStringSubmatch(body)
	refresh := regexp.MustCompile(`<meta http-equiv="refresh" content="0; url=([^"]+)">`).FindStringSubmatch(body)
	if link == nil || refresh == nil || html.UnescapeString(link[1]) != html.UnescapeString(refresh[1]) || strings.Contains(body, `id="principal"`) {
		t.Fatalf("the signed-out page:\n%s", body)
	}
	end, err := url.Parse(html.UnescapeString(link[1]))
	if err != nil || end.Scheme+"://"+end.Host+end.Path != f.provider.Issuer()+"/logout" ||
		end.Query().Get("client_id") != f.provider.ClientID || end.Query().Get("post_logout_redirect_uri") != f.base+"/login" {
		t.Fatalf("logout redirects to %q, want the provider's end-session endpoint", resp.Header.Get("Location"))
	}
	back, err := c.c.Get(end.String())
	if err != nil {
		t.Fatal(err)
	}
	back.Body.Close()
	if back.StatusCode != http.StatusFound || back.Header.Get("Location") != f.base+"/login" {
		t.Fatalf("the provider's sign-out answers %d, Location %q", back.StatusCode, back.Header.Get("Location"))
	}
	if resp, _ := c.do("GET", "/failures", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
}

// Signing out of a session that did not come from the provider, or with a provider that
// announces no end-session endpoint or cannot be reached, ends the session here and goes to
// the sign-in page.
func TestOIDCLogoutWithoutProviderSession(t *testing.T) {
	t.Parallel()
	logout := func(f *oidcFixture, c *client) (*http.Response, string) {
		tok := c.csrf("/failures")
		resp, body := c.do("POST", "/logout", url.Values{"csrf": {tok}})
		if gone := cookieNamed(resp, oidcSessionCookie); gone == nil || gone.MaxAge >= 0 {
			t.Errorf("logout leaves the OIDC session cookie: %+v", gone)
		}
		if resp, _ := c.do("GET", "/failures", nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after logout: %d", resp.StatusCode)
		}
		return resp, body
	}
	wantLogin := func(name string, resp *http.Response) {
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("%s: logout answers %d, Location %q, want /login", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}

	f := newOIDCFixture(t, 0)
	token := f.client()
	token.login(operatorToken)
	resp, _ := logout(f, token)
	wantLogin("a token session", resp)

	noEnd := newOIDCFixture(t, 0)
	noEnd.provider.WithoutEndSession()
	c := noEnd.client()
	noEnd.signIn(c)
	resp, _ = logout(noEnd, c)
	wantLogin("a provider without end_session_endpoint", resp)

	down := newOIDCFixture(t, 0)
	c = down.client()
	down.signIn(c)
	down.provider.SetDown(true)
	// The provider was discovered at sign-in: the discovery is cached, so its end-session
	// endpoint is still known, and the browser is sent there (it answers when it is back).
	if resp, body := logout(down, c); resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="`+down.provider.Issuer()+`/logout?`) {
		t.Errorf("logout with the provider down: %d %s", resp.StatusCode, body)
	}
}

func TestOIDCViewerWithoutPayload(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	f.provider.SetUser(map[string]any{"sub": "user-2", "name": "Vera", "groups": []string{"redrive-viewers", "other"}})
	c := f.client()
	f.signIn(c)
	resp, body := c.do("GET", "/failures", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="principal">Vera (user-2)<`) || !strings.Contains(body, `id="role">viewer<`) ||
		strings.Contains(body, `id="bulk-close"`) {
		t.Fatalf("viewer: %d %s", resp.StatusCode, body)
	}
	if resp, _ := c.do("GET", "/failures/"+f.ids[2].String()+"/key", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("payload download of a viewer without the payload permission: %d", resp.StatusCode)
	}
}

func TestOIDCCallbackRefused(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)

	cases := []struct {
		name   string
		change func(c *client, q url.Values) url.Values
		want   string
	}{
		{"state mismatch", func(c *client, q url.Values) url.Values { q.Set("state", q.Get("state")+"x"); return q }, "state does not match"},
		{"no state", func(c *client, q url.Values) url.Values { q.Del("state"); return q }, "state does not match"},
		{"no sign-in cookie", func(c *client, q url.Values) url.Values {
			f.setCookie(c, signInCookie, signInPath, "")
			return q
		}, "not started in this browser"},
		{"forged sign-in cookie", func(c *client, q url.Values) url.Values {
			sealed, _ := f.handler.seal(oidcSessionCookie, signInState{State: "s", Nonce: "n", Verifier: "v", Expires: time.Now().Add(time.Hour).Unix()})
			f.setCookie(c, signInCookie, signInPath, sealed) // sealed for another purpose
			q.Set("state", "s")
			return q
		}, "not started in this browser"},
		{"provider error", func(c *client, q url.Values) url.Values {
			q.Del("code")
			q.Set("error", "access_denied")
			return q
		}, "refused the sign-in (access_denied)"},
		{"no code", func(c *client, q url.Values) url.Values { q.Del("code"); return q }, "no authorization code"},
		{"unknown code", func(c *client, q url.Values) url.Values { q.Set("code", "forged"); return q }, "could not be verified"},
	}
	for _, tc := range cases {
		c := f.client()
		q := tc.change(c, f.startSignIn(c, "/groups"))
		resp, body := f.callback(c, q)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, tc.want) || !strings.Contains(body, `name="token"`) {
			t.Errorf("%s: %d, want 401 with %q and the token form: %s", tc.name, resp.StatusCode, tc.want, body)
		}
		if cookieNamed(resp, oidcSessionCookie) != nil {
			t.Errorf("%s: a session cookie was set", tc.name)
		}
		if strings.Contains(body, q.Get("code")) && q.Get("code") != "" {
			t.Errorf("%s: the page shows the code", tc.name)
		}
		if resp, _ := c.do("GET", "/groups", nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: signed in after a refused callback: %d", tc.name, resp.StatusCode)
		}
	}

	// A sign-in older than ten minutes.
	c := f.client()
	q := f.startSignIn(c, "/")
	f.skew.Store(int64(11 * time.Minute))
	if resp, body := f.callback(c, q); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "expired") {
		t.Errorf("late callback: %d %s", resp.StatusCode, body)
	}
}

func TestOIDCRoleNone(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	f.provider.SetUser(map[string]any{"sub": "user-3", "preferred_username": "mallory", "groups": []string{"unmapped"}})
	c := f.client()
	resp, body := f.callback(c, f.startSignIn(c, "/"))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "mallory (user-3)") || !strings.Contains(body, "viewer role") {
		t.Fatalf("user without a role: %d %s", resp.StatusCode, body)
	}
	if cookieNamed(resp, oidcSessionCookie) != nil {
		t.Fatal("a user without a role got a session")
	}
	if resp, _ := c.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a user without a role is signed in: %d", resp.StatusCode)
	}
}

func TestOIDCSessionCookieRefused(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 30*time.Minute)
	c := f.client()
	good := f.signIn(c)
	if good.MaxAge > 1800 || good.MaxAge < 1700 {
		t.Fatalf("session cookie MaxAge %d, want the 30 min session bound", good.MaxAge)
	}
	if resp, _ := c.do("GET", "/", nil); resp.StatusCode != 200 {
		t.Fatalf("signed in: %d", resp.StatusCode)
	}

	otherKey, err := New(Config{Core: f.core, Auth: f.handler.cfg.Auth, Logger: quiet, SessionKey: bytes.Repeat([]byte{8}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	admin := oidcSession{Name: "eve (x)", Role: "admin", Payload: true, Expires: time.Now().Add(time.Hour).Unix()}
	sealedElsewhere, _ := otherKey.(*handler).seal(oidcSessionCookie, admin)
	wrongPurpose, _ := f.handler.seal(signInCookie, admin)
	noRole, _ := f.handler.seal(oidcSessionCookie, oidcSession{Name: "eve (x)", Role: "none", Expires: admin.Expires})
	flipped := []byte(good.Value)
	flipped[len(flipped)/2] ^= 1
	if flipped[len(flipped)/2] == '-' || flipped[len(flipped)/2] == '_' { // stay base64url
		flipped[len(flipped)/2] = 'A'
	}
	plain := base64.RawURLEncoding.EncodeToString([]byte(`{"n":"eve (x)","r":"admin","e":9999999999}`))
	for name, v := range map[string]string{
		"changed": string(flipped), "sealed under another key": sealedElsewhere, "sealed for the sign-in": wrongPurpose,
		"no role": noRole, "unsealed": plain, "truncated": good.Value[:20], "garbage": "%%%",
	} {
		c := f.client()
		f.setCookie(c, oidcSessionCookie, "/", v)
		resp, _ := c.do("GET", "/", nil)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
			t.Errorf("%s session cookie: %d, want a redirect to the login", name, resp.StatusCode)
		}
		if gone := cookieNamed(resp, oidcSessionCookie); gone == nil || gone.MaxAge >= 0 {
			t.Errorf("%s session cookie is not cleared: %+v", name, gone)
		}
	}
	// The trusted proxy's user comes first, then the OIDC session, then the token cookie.
	both := f.client()
	f.setCookie(both, oidcSessionCookie, "/", good.Value)
	f.setCookie(both, tokenCookie, "/", base64.RawURLEncoding.EncodeToString([]byte(operatorToken)))
	if _, body := both.do("GET", "/", nil); !strings.Contains(body, `id="principal">alice (user-1)<`) {
		t.Errorf("the OIDC session does not come before the token cookie: %s", body)
	}
	both.hdr.Set("X-Forwarded-User", "pat")
	if _, body := both.do("GET", "/", nil); !strings.Contains(body, `id="principal">pat<`) {
		t.Errorf("the trusted proxy does not come first: %s", body)
	}

	// The session ends after OIDCSessionMaxAge, before the ID token expires.
	f.skew.Store(int64(31 * time.Minute))
	resp, _ := c.do("GET", "/", nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("expired session: %d", resp.StatusCode)
	}
}

func TestOIDCProviderOutage(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	f.provider.SetDown(true)
	c := f.client()
	resp, body := c.do("GET", "/auth/login?next=%2Fgroups", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "identity provider is unreachable") ||
		!strings.Contains(body, `name="token"`) || cookieNamed(resp, signInCookie) != nil {
		t.Fatalf("sign-in while the provider is down: %d %s", resp.StatusCode, body)
	}
	// The token form still works.
	tok := csrfRE.FindStringSubmatch(body)[1]
	resp, _ = c.do("POST", "/login", url.Values{"csrf": {tok}, "token": {operatorToken}, "next": {"/groups"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/groups" {
		t.Fatalf("token sign-in while the provider is down: %d", resp.StatusCode)
	}
	if resp, body := c.do("GET", "/groups", nil); resp.StatusCode != 200 || !strings.Contains(body, `id="principal">olivia<`) {
		t.Fatalf("groups: %d", resp.StatusCode)
	}

	// The provider goes down between the redirect and the callback: the page says it is
	// unreachable (503) and keeps the token form.
	f2 := newOIDCFixture(t, 0)
	c = f2.client()
	q := f2.startSignIn(c, "/")
	f2.provider.SetDown(true)
	resp, body = f2.callback(c, q)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "unreachable") || !strings.Contains(body, `name="token"`) ||
		cookieNamed(resp, oidcSessionCookie) != nil {
		t.Fatalf("callback while the provider is down: %d %s", resp.StatusCode, body)
	}
}

func TestOIDCNotConfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	if _, body := c.do("GET", "/login", nil); strings.Contains(body, "oidc-sign-in") {
		t.Fatal("the login page offers OIDC sign-in without OIDC")
	}
	for _, p := range []string{"/auth/login", "/auth/callback?code=x&state=y"} {
		if resp, _ := c.do("GET", p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s without OIDC: %d", p, resp.StatusCode)
		}
	}
	for name, cfg := range map[string]Config{
		"max age too short": {OIDCSessionMaxAge: time.Second},
		"max age too long":  {OIDCSessionMaxAge: 8 * 24 * time.Hour},
		"invisible name":    {OIDCName: "Corp\u202eSSO"},
	} {
		cfg.Core, cfg.Auth = f.core, f.handler.(*handler).cfg.Auth
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "OIDC") {
			t.Errorf("%s: New = %v", name, err)
		}
	}
}

func TestOIDCWithoutRedirectURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: "https://id.example", ClientID: "redrive"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Core: f.core, Auth: f.handler.(*handler).cfg.Auth, Logger: quiet, OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.srv = srv
	resp, body := f.client().do("GET", "/auth/login", nil)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "not set up completely") ||
		!strings.Contains(body, `name="token"`) || !strings.Contains(body, "Sign in with single sign-on") {
		t.Fatalf("sign-in without a redirect URL: %d %s", resp.StatusCode, body)
	}
}
