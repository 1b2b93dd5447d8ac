package web

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/cookiejar"
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

// oidcFixture is the fixture's UI with OIDC sign-in against an in-process OpenID Certified
// provider (testkit.OIDCProvider), whose user alice (sub user-1) is in the group
// redrive-operators (operator with the payload permission); vera (sub user-2) is in
// redrive-viewers (viewer); nobody (sub user-3) is in no group. The UI's and the sessions'
// clock can be moved forward.
type oidcFixture struct {
	*fixture
	provider *testkit.OIDCProvider
	handler  *handler
	sessions *auth.Sessions
	// base is the UI's address as the provider knows it: http://localhost:port, another site
	// than the provider's http://127.0.0.1:port, so that the provider's redirect is cross-site.
	base string
	// skew moves the UI's clock forward (nanoseconds).
	skew atomic.Int64
}

// oidcSessionKey is the fixture's session key.
var oidcSessionKey = bytes.Repeat([]byte{7}, 32)

func newOIDCFixture(t *testing.T, maxAge time.Duration) *oidcFixture {
	t.Helper()
	f := &oidcFixture{fixture: newFixture(t), provider: testkit.NewOIDCProvider(t)}
	f.provider.AddUser(testkit.OIDCUser{ID: "user-2", Username: "vera", Password: "vera-password",
		IDClaims: map[string]any{"groups": []string{"redrive-viewers"}}})
	f.provider.AddUser(testkit.OIDCUser{ID: "user-3", Username: "nobody", Password: "nobody-password"})
	srv := httptest.NewUnstartedServer(nil)
	f.base = fmt.Sprintf("http://localhost:%d", srv.Listener.Addr().(*net.TCPAddr).Port)
	f.provider.AllowRedirect(f.base + "/auth/callback")
	f.provider.AllowRedirect(f.base + "/login")
	roles, err := auth.ParseProxyRoles("redrive-operators=operator+payload,redrive-viewers=viewer")
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) }
	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: f.provider.Issuer(), ClientID: f.provider.ClientID,
		ClientSecret: f.provider.Secret, RedirectURL: f.base + "/auth/callback", RoleMapping: roles, Logger: quiet, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokens("olivia:operator+payload:" + operatorToken + ",victor:viewer+payload:" + viewerToken +
		",ada:admin:" + adminToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens, OIDC: o,
		TrustedProxies:   []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		ProxyDefaultRole: auth.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	if f.sessions, err = auth.NewSessions(auth.SessionsConfig{Store: f.store, MaxAge: maxAge, Now: now}); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Core: f.core, Auth: a, Logger: quiet, PageSize: 2, SessionKey: oidcSessionKey,
		OIDC: o, OIDCName: "Testkit ID", Sessions: f.sessions, Now: now})
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

// providerClient is a browser at the provider: it follows the provider's redirects and stops
// at the one back to the UI.
func (f *oidcFixture) providerClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), f.base) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// startSignIn runs GET /auth/login?next=… with c and signs user in at the provider, and
// returns the query the provider sends back to the callback (code and state).
func (f *oidcFixture) startSignIn(c *client, next, user string) url.Values {
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
	if strings.Contains(ck.Value, authorize.Query().Get("state")) {
		f.t.Fatal("the sign-in cookie shows its state in the clear")
	}
	pc := f.providerClient()
	at, err := pc.Get(authorize.String())
	if err != nil {
		f.t.Fatal(err)
	}
	back := f.provider.SubmitLogin(pc, at, user, user+"-password")
	back.Body.Close()
	loc, err := url.Parse(back.Header.Get("Location"))
	if back.StatusCode != http.StatusFound || err != nil || loc.Path != "/auth/callback" {
		f.t.Fatalf("the provider answers %d, Location %q", back.StatusCode, back.Header.Get("Location"))
	}
	return loc.Query()
}

// callback sends the provider's answer q to the UI's callback.
func (f *oidcFixture) callback(c *client, q url.Values) (*http.Response, string) {
	f.t.Helper()
	return c.do("GET", "/auth/callback?"+q.Encode(), nil)
}

// signIn signs c in as user with OIDC and returns the session cookie.
func (f *oidcFixture) signIn(c *client, user string) *http.Cookie {
	f.t.Helper()
	resp, body := f.callback(c, f.startSignIn(c, "/failures", user))
	ck := cookieNamed(resp, authCookie)
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

// withCookie returns a fresh client that carries only the session cookie ck: a copy of it
// replayed from elsewhere.
func (f *oidcFixture) withCookie(ck *http.Cookie) *client {
	c := f.client()
	f.setCookie(c, ck.Name, "/", ck.Value)
	return c
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

	q := f.startSignIn(c, "/failures?state=PERMANENT", "alice")
	resp, body = f.callback(c, q)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/failures?state=PERMANENT" {
		t.Fatalf("callback: %d, Location %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	ck := cookieNamed(resp, authCookie)
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" ||
		ck.MaxAge < 3500 || ck.MaxAge > 3601 || strings.Contains(ck.Value, "alice") || len(ck.Value) != 43 {
		t.Fatalf("session cookie = %+v, want a random secret, HttpOnly, Lax, until the ID token expires in an hour", ck)
	}
	if gone := cookieNamed(resp, signInCookie); gone == nil || gone.MaxAge >= 0 {
		t.Fatalf("the callback keeps the sign-in cookie: %+v", gone)
	}

	resp, body = c.do("GET", "/failures", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="principal">alice<`) ||
		!strings.Contains(body, `id="role">operator<`) || !strings.Contains(body, `id="bulk-close"`) {
		t.Fatalf("failures after sign-in: %d %s", resp.StatusCode, body)
	}
	// The payload permission of the group survives in the session.
	if resp, raw := c.do("GET", "/failures/"+f.ids[2].String()+"/key", nil); resp.StatusCode != 200 || raw != "key-shipments" {
		t.Fatalf("payload download: %d %q", resp.StatusCode, raw)
	}
	// The audit log names the issuer and the subject: never the same name as a token's.
	tok := csrfRE.FindStringSubmatch(body)[1]
	resp, body = c.act("/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"sso close"}})
	if resp.StatusCode != 200 {
		t.Fatalf("close: %d %s", resp.StatusCode, body)
	}
	var who string
	want := "oidc:" + f.provider.Issuer() + "#user-1 (alice)"
	if err := f.pool.QueryRow(context.Background(), `SELECT principal FROM audit_log WHERE reason = 'sso close'`).Scan(&who); err != nil || who != want {
		t.Fatalf("audit principal %q (%v), want %q", who, err, want)
	}
	// The session is in the store, with the ID token for the sign-out.
	list, err := f.sessions.List(context.Background(), 10)
	if err != nil || len(list) != 1 || list[0].Principal.Name != want || list[0].IDToken == "" || list[0].Principal.Method != auth.MethodOIDC {
		t.Fatalf("sessions = %+v, %v", list, err)
	}

	// The provider's answer is good for one sign-in only.
	if resp, _ := f.callback(f.client(), q); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("replayed callback: %d", resp.StatusCode)
	}
}

// Signing out ends the session at once: a copy of the cookie taken before is refused after;
// the provider's session is ended too, with id_token_hint.
func TestOIDCSignOutAndCookieReplay(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	c := f.client()
	copied := f.signIn(c, "alice")
	if resp, _ := f.withCookie(copied).do("GET", "/groups", nil); resp.StatusCode != 200 {
		t.Fatalf("the copied cookie before sign-out: %d", resp.StatusCode)
	}
	tok := c.csrf("/failures")
	resp, body := c.do("POST", "/logout", url.Values{"csrf": {tok}})
	if gone := cookieNamed(resp, authCookie); resp.StatusCode != http.StatusOK || gone == nil || gone.MaxAge >= 0 {
		t.Fatalf("logout: %d, session cookie %+v", resp.StatusCode, gone)
	}
	for _, path := range []string{"/groups", "/failures", "/"} {
		if resp, _ := f.withCookie(copied).do("GET", path, nil); resp.StatusCode != http.StatusSeeOther ||
			!strings.HasPrefix(resp.Header.Get("Location"), "/login") {
			t.Errorf("the cookie copied before sign-out, replayed on %s: %d, want the sign-in page", path, resp.StatusCode)
		}
	}
	replay := f.withCookie(copied)
	if resp, _ := replay.do("POST", "/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"replay"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an action with the replayed cookie: %d, want 401", resp.StatusCode)
	}
	// The page sends the browser on (a form's answer may not redirect to another site under
	// form-action 'self'): a refresh and a link, both to the provider's end-session address.
	link := regexp.MustCompile(`<a href="([^"]+)" id="provider-sign-out">Sign out at Testkit ID</a>`).FindStringSubmatch(body)
	refresh := regexp.MustCompile(`<meta http-equiv="refresh" content="0; url=([^"]+)">`).FindStringSubmatch(body)
	if link == nil || refresh == nil || html.UnescapeString(link[1]) != html.UnescapeString(refresh[1]) || strings.Contains(body, `id="principal"`) {
		t.Fatalf("the signed-out page:\n%s", body)
	}
	end, err := url.Parse(html.UnescapeString(link[1]))
	if err != nil || end.Scheme+"://"+end.Host+end.Path != f.provider.Issuer()+"/end_session" ||
		end.Query().Get("client_id") != f.provider.ClientID || end.Query().Get("post_logout_redirect_uri") != f.base+"/login" ||
		end.Query().Get("id_token_hint") == "" {
		t.Fatalf("logout sends the browser to %q, want the provider's end-session endpoint with id_token_hint", end)
	}
	back, err := f.providerClient().Get(end.String())
	if err != nil {
		t.Fatal(err)
	}
	back.Body.Close()
	if back.StatusCode != http.StatusFound || back.Header.Get("Location") != f.base+"/login" {
		t.Fatalf("the provider's sign-out answers %d, Location %q", back.StatusCode, back.Header.Get("Location"))
	}
	if ends := f.provider.EndSessions(); len(ends) != 1 || ends[0].Get("id_token_hint") == "" {
		t.Fatalf("the provider's end-session calls: %v", ends)
	}
	if list, _ := f.sessions.List(context.Background(), 10); len(list) != 0 {
		t.Fatalf("sessions after sign-out: %+v", list)
	}
}

// An admin revokes a session on one instance; it ends at once on another, which shares only
// the store (not even the session key). Sessions expire with the ID token or the max age.
func TestSessionRevokeAndExpiry(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 30*time.Minute)
	other, err := New(Config{Core: f.core, Auth: f.handler.cfg.Auth, Logger: quiet, OIDC: f.handler.cfg.OIDC, Sessions: f.sessions,
		SessionKey: bytes.Repeat([]byte{8}, 32), Now: f.handler.cfg.Now})
	if err != nil {
		t.Fatal(err)
	}
	second := httptest.NewServer(other)
	t.Cleanup(second.Close)

	user := f.client()
	ck := f.signIn(user, "vera")
	if ck.MaxAge < 1790 || ck.MaxAge > 1801 {
		t.Fatalf("session cookie MaxAge %d, want the 30 min bound", ck.MaxAge)
	}
	// The same cookie works on the other instance.
	onSecond := &client{f: &fixture{t: t, srv: second}, hdr: http.Header{}, c: f.withCookie(ck).c}
	u1, _ := url.Parse(f.srv.URL)
	u2, _ := url.Parse(second.URL)
	onSecond.c.Jar.SetCookies(u2, onSecond.c.Jar.Cookies(u1))
	if resp, body := onSecond.do("GET", "/groups", nil); resp.StatusCode != 200 || !strings.Contains(body, `id="principal">vera<`) {
		t.Fatalf("the session on the other instance: %d", resp.StatusCode)
	}
	// A viewer cannot see the sessions; the admin (token sign-in, on the other instance) can.
	if resp, _ := user.do("GET", "/sessions", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer's /sessions: %d", resp.StatusCode)
	}
	admin := &client{f: &fixture{t: t, srv: second}, hdr: http.Header{}, c: f.client().c}
	admin.login(adminToken)
	resp, body := admin.do("GET", "/sessions", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "oidc:"+f.provider.Issuer()+"#user-2 (vera)") || !strings.Contains(body, "token:ada") ||
		!strings.Contains(body, `id="nav-sessions"`) {
		t.Fatalf("sessions page: %d %s", resp.StatusCode, body)
	}
	list, _ := f.sessions.List(context.Background(), 10)
	var id string
	for _, s := range list {
		if s.Principal.Display == "vera" {
			id = s.ID
		}
	}
	if id == "" || strings.Contains(body, ck.Value) {
		t.Fatalf("no session of vera, or the page shows a secret: %+v", list)
	}
	tok := csrfRE.FindStringSubmatch(body)[1]
	resp, _ = admin.do("POST", "/sessions/"+id+"/revoke", url.Values{"csrf": {tok}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if _, body := admin.do("GET", resp.Header.Get("Location"), nil); !strings.Contains(body, `id="revoked"`) || strings.Contains(body, "#user-2") {
		t.Fatalf("sessions page after the revocation:\n%s", body)
	}
	if resp, _ := user.do("GET", "/groups", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the revoked session on the first instance: %d, want the sign-in page", resp.StatusCode)
	}
	var by string
	if err := f.pool.QueryRow(context.Background(), `SELECT principal FROM audit_log WHERE action = 'session_revoke' AND details->>'session' = $1`, id).Scan(&by); err != nil || by != "token:ada" {
		t.Fatalf("audit of the revocation: %q (%v)", by, err)
	}
	if resp, _ := admin.do("POST", "/sessions/"+id+"/revoke", url.Values{"csrf": {tok}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("revoking twice: %d", resp.StatusCode)
	}
	// Expiry: the session ends at the max age, and leaves the list.
	again := f.client()
	f.signIn(again, "alice")
	f.skew.Store(int64(31 * time.Minute))
	if resp, _ := again.do("GET", "/groups", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("expired session: %d", resp.StatusCode)
	}
	if list, _ := f.sessions.List(context.Background(), 10); len(list) != 0 {
		t.Fatalf("sessions after their expiry: %+v", list)
	}
}

func TestOIDCViewerWithoutPayload(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	c := f.client()
	f.signIn(c, "vera")
	resp, body := c.do("GET", "/failures", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="principal">vera<`) || !strings.Contains(body, `id="role">viewer<`) ||
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
			sealed, _ := f.handler.seal("another purpose", signInState{State: "s", Nonce: "n", Verifier: "v", Expires: time.Now().Add(time.Hour).Unix()})
			f.setCookie(c, signInCookie, signInPath, sealed)
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
		q := tc.change(c, f.startSignIn(c, "/groups", "alice"))
		resp, body := f.callback(c, q)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, tc.want) || !strings.Contains(body, `name="token"`) {
			t.Errorf("%s: %d, want 401 with %q and the token form: %s", tc.name, resp.StatusCode, tc.want, body)
		}
		if cookieNamed(resp, authCookie) != nil {
			t.Errorf("%s: a session cookie was set", tc.name)
		}
		if resp, _ := c.do("GET", "/groups", nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: signed in after a refused callback: %d", tc.name, resp.StatusCode)
		}
	}

	// A sign-in older than ten minutes.
	c := f.client()
	q := f.startSignIn(c, "/", "alice")
	f.skew.Store(int64(11 * time.Minute))
	if resp, body := f.callback(c, q); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "expired") {
		t.Errorf("late callback: %d %s", resp.StatusCode, body)
	}
}

func TestOIDCRoleNone(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	c := f.client()
	resp, body := f.callback(c, f.startSignIn(c, "/", "nobody"))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no redrive role") || cookieNamed(resp, authCookie) != nil {
		t.Fatalf("user without a role: %d %s", resp.StatusCode, body)
	}
	if resp, _ := c.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a user without a role is signed in: %d", resp.StatusCode)
	}
}

// Cookies that are not a live session's secret count for nothing, and are cleared; so are the
// cookies of earlier versions that held the principal themselves.
func TestSessionCookieRefused(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	good := f.signIn(f.client(), "alice")
	flipped := []byte(good.Value)
	flipped[10] ^= 1
	if flipped[10] == '-' || flipped[10] == '_' {
		flipped[10] = 'A'
	}
	for name, v := range map[string]string{"changed": string(flipped), "short": good.Value[:20], "empty-ish": "x",
		"other secret": strings.Repeat("A", 43)} {
		c := f.client()
		f.setCookie(c, authCookie, "/", v)
		resp, _ := c.do("GET", "/groups", nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: %d, want the sign-in page", name, resp.StatusCode)
		}
		if v != "x" {
			if gone := cookieNamed(resp, authCookie); gone == nil || gone.MaxAge >= 0 {
				t.Errorf("%s: the cookie is not cleared", name)
			}
		}
	}
	c := f.client()
	f.setCookie(c, legacyOIDCCookie, "/", "sealed-by-an-old-version")
	f.setCookie(c, legacyTokenCookie, "/", "b2xpdmlh")
	resp, _ := c.do("GET", "/groups", nil)
	if resp.StatusCode != http.StatusSeeOther || cookieNamed(resp, legacyOIDCCookie) == nil || cookieNamed(resp, legacyTokenCookie) == nil {
		t.Errorf("old cookies: %d, cleared %v", resp.StatusCode, resp.Cookies())
	}
	// A token sign-in is a session too, and ends with its sign-out.
	tc := f.client()
	tc.login(operatorToken)
	var tokenCk *http.Cookie
	u, _ := url.Parse(f.srv.URL)
	for _, ck := range tc.c.Jar.Cookies(u) {
		if ck.Name == authCookie {
			tokenCk = ck
		}
	}
	if tokenCk == nil || strings.Contains(tokenCk.Value, operatorToken) {
		t.Fatalf("token session cookie %+v", tokenCk)
	}
	tc.do("POST", "/logout", url.Values{"csrf": {tc.csrf("/groups")}})
	if resp, _ := f.withCookie(tokenCk).do("GET", "/groups", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("token session cookie replayed after sign-out: %d", resp.StatusCode)
	}
}

// While the provider is unreachable (also after it was discovered): the sign-in page answers
// 503 and keeps the token form, the break-glass token signs in, and sessions keep working.
func TestOIDCProviderOutage(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	signed := f.client()
	f.signIn(signed, "alice")
	f.provider.SetDown(true)
	f.skew.Store(int64(11 * time.Second)) // the last contact is no proof of reachability any more
	c := f.client()
	resp, body := c.do("GET", "/auth/login?next=%2Fgroups", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "unreachable") || !strings.Contains(body, `name="token"`) ||
		strings.Contains(resp.Header.Get("Location"), f.provider.Issuer()) {
		t.Fatalf("sign-in while the provider is down: %d %s", resp.StatusCode, body)
	}
	if resp, _ := signed.do("GET", "/groups", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a signed-in session while the provider is down: %d", resp.StatusCode)
	}
	c.login(adminToken)
	if resp, body := c.do("GET", "/sessions", nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "token:ada") {
		t.Fatalf("break-glass token while the provider is down: %d", resp.StatusCode)
	}
	// The provider goes down between the redirect and the callback: the page says it is
	// unreachable (503) and keeps the token form.
	f.provider.SetDown(false)
	f.skew.Store(0)
	d := f.client()
	q := f.startSignIn(d, "/", "alice")
	f.provider.SetDown(true)
	if resp, body := f.callback(d, q); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `name="token"`) {
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
	cfg := Config{OIDCName: "Corp\u202eSSO", Core: f.core, Auth: f.handler.(*handler).cfg.Auth}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "OIDC") {
		t.Errorf("invisible name: New = %v", err)
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
