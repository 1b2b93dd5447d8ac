package auth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
)

const redirectURL = "http://127.0.0.1:8080/auth/callback"

// clock is a test clock that only moves when told.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *clock) Now() time.Time             { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration)    { c.ns.Add(int64(d)) }
func (c *clock) Unix(d time.Duration) int64 { return c.Now().Add(d).Unix() }

func newOIDC(t *testing.T, p *testkit.OIDCProvider, mod func(*auth.OIDCConfig)) *auth.OIDC {
	t.Helper()
	p.AllowRedirect(redirectURL)
	cfg := auth.OIDCConfig{IssuerURL: p.Issuer(), ClientID: p.ClientID, ClientSecret: p.Secret, RedirectURL: redirectURL,
		RoleMapping: map[string]auth.Grant{"redrive-viewers": {Role: auth.RoleViewer}, "redrive-operators": {Role: auth.RoleOperator},
			"redrive-admins": {Role: auth.RoleAdmin}}}
	if mod != nil {
		mod(&cfg)
	}
	o, err := auth.NewOIDC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// signIn runs the UI's sign-in against the provider as a browser would, up to Exchange.
func signIn(t *testing.T, p *testkit.OIDCProvider, o *auth.OIDC, user, password string) (auth.SignedIn, error) {
	t.Helper()
	ctx := context.Background()
	in := auth.NewSignIn()
	target, err := o.AuthCodeURL(ctx, in)
	if err != nil {
		return auth.SignedIn{}, err
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirectURL) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	resp = p.SubmitLogin(c, resp, user, password)
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("the provider did not send the browser back: HTTP %d", resp.StatusCode)
	}
	if loc.Query().Get("state") != in.State {
		t.Fatalf("state %q, want the sign-in's", loc.Query().Get("state"))
	}
	return o.Exchange(ctx, in, loc.Query().Get("code"))
}

func bearer(a *auth.Authenticator, token string) (auth.Principal, error) {
	r := httptest.NewRequest("GET", "/api/v1/failures", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return a.Authenticate(r)
}

// The token cases of the API's JWT bearer tokens: only access tokens, and times with exactly
// the configured skew.
func TestJWTBearerTokens(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	clk := newClock()
	o := newOIDC(t, p, func(c *auth.OIDCConfig) { c.Now = clk.Now; c.ClockSkew = 30 * time.Second })
	tokens, err := auth.ParseTokens("ops:admin:" + adminToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens, OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	iss := p.Issuer()
	user := map[string]any{"sub": "u-42", "preferred_username": "carol", "groups": []string{"staff", "redrive-operators"}}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range user {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	idToken, _ := p.Tokens("alice", "alice-password", "profile")
	other := testkit.OIDCProviderKey(t)
	carol := "oidc:" + iss + "#u-42 (carol) operator"
	cases := []struct {
		name, token, want string // want: "name role" when accepted, else a part of the reason
	}{
		{"access token (typ at+jwt)", p.Token(user, testkit.TokenOptions{}), carol},
		{"typ application/at+jwt", p.Token(user, testkit.TokenOptions{Type: "application/at+jwt"}), carol},
		{"ID token of a real sign-in", idToken, "not an access token"},
		{"typ JWT for the client id", p.Token(user, testkit.TokenOptions{Type: "JWT"}), "not an access token"},
		{"no typ", p.Token(user, testkit.TokenOptions{Type: "-"}), "not an access token"},
		{"expired within the skew", p.Token(with(map[string]any{"exp": clk.Unix(-29 * time.Second)}), testkit.TokenOptions{}), carol},
		{"expired just past the skew", p.Token(with(map[string]any{"exp": clk.Unix(-31 * time.Second)}), testkit.TokenOptions{}), "expired"},
		{"nbf within the skew", p.Token(with(map[string]any{"nbf": clk.Unix(29 * time.Second)}), testkit.TokenOptions{}), carol},
		{"nbf just past the skew", p.Token(with(map[string]any{"nbf": clk.Unix(31 * time.Second)}), testkit.TokenOptions{}), "not valid yet"},
		{"nbf 4 minutes ahead", p.Token(with(map[string]any{"nbf": clk.Unix(4 * time.Minute)}), testkit.TokenOptions{}), "not valid yet"},
		{"iat in the future", p.Token(with(map[string]any{"iat": clk.Unix(2 * time.Minute)}), testkit.TokenOptions{}), "not valid yet"},
		{"no exp", p.Token(with(map[string]any{"exp": nil}), testkit.TokenOptions{}), "no expiry"},
		{"forged signature", p.Token(user, testkit.TokenOptions{Key: other}), "bad signature"},
		{"unknown kid", p.Token(user, testkit.TokenOptions{Key: other, KeyID: "nope"}), "unknown signing key"},
		{"alg none", p.UnsignedToken(user), "not valid"},
		{"wrong audience", p.Token(with(map[string]any{"aud": "someone-else"}), testkit.TokenOptions{}), "wrong audience"},
		{"wrong issuer", p.Token(with(map[string]any{"iss": "https://evil.example"}), testkit.TokenOptions{}), "issuer mismatch"},
		{"admin by group", p.Token(map[string]any{"sub": "u-1", "groups": "redrive-admins"}, testkit.TokenOptions{}), "oidc:" + iss + "#u-1 admin"},
		{"no mapped group", p.Token(map[string]any{"sub": "u-2", "name": "Dan", "groups": []string{"x"}}, testkit.TokenOptions{}), "(Dan) none"},
		{"no subject", p.Token(map[string]any{"groups": []string{"redrive-admins"}}, testkit.TokenOptions{}), "no subject"},
		{"static token still works", adminToken, "token:ops admin"},
	}
	for _, c := range cases {
		pr, err := bearer(a, c.token)
		got := pr.Name + " " + pr.Role.String()
		if err != nil {
			got = err.Error()
			if !errors.Is(err, auth.ErrUnauthenticated) {
				t.Errorf("%s: %v does not wrap ErrUnauthenticated", c.name, err)
			}
			if strings.Contains(got, c.token) {
				t.Errorf("%s: the error holds the token", c.name)
			}
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// With an audience of its own (Okta's api://default), the provider's real JWT access tokens
// are accepted, and its ID tokens are not, though they name the audience too.
func TestJWTAudienceOfItsOwn(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	p.SetAudience("api://default")
	o := newOIDC(t, p, func(c *auth.OIDCConfig) { c.Audience = "api://default" })
	a, err := auth.NewAuthenticator(auth.Config{OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	idToken, access := p.Tokens("alice", "alice-password", "profile")
	if pr, err := bearer(a, access); err != nil || pr.Role != auth.RoleOperator || pr.Subject != "user-1" {
		t.Errorf("access token: %+v, %v", pr, err)
	}
	if _, err := bearer(a, idToken); err == nil || !strings.Contains(err.Error(), "ID token") {
		t.Errorf("ID token as a bearer token: %v", err)
	}
	// Without the configured audience, the same access token is refused.
	o2 := newOIDC(t, p, nil)
	a2, _ := auth.NewAuthenticator(auth.Config{OIDC: o2})
	if _, err := bearer(a2, access); err == nil || !strings.Contains(err.Error(), "not an access token") {
		t.Errorf("typ JWT access token with the default audience: %v", err)
	}
}

// A key withdrawn from the provider's key set is refused once the cached keys expire (the
// configured bound, or a shorter Cache-Control max-age); a rotated key is fetched when a token
// names it.
func TestJWKSRotationAndWithdrawal(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	clk := newClock()
	o := newOIDC(t, p, func(c *auth.OIDCConfig) {
		c.Now = clk.Now
		c.KeysMaxAge = 5 * time.Minute
		c.KeysRefetchInterval = 10 * time.Second
	})
	ctx := context.Background()
	user := map[string]any{"sub": "u", "groups": []string{"redrive-admins"}, "exp": time.Now().Add(24 * time.Hour).Unix()}
	oldKID := p.SigningKID()
	old := p.Token(user, testkit.TokenOptions{})
	if _, err := o.VerifyBearer(ctx, old); err != nil {
		t.Fatal(err)
	}
	if n := p.JWKSFetches(); n != 1 {
		t.Fatalf("fetches %d, want 1", n)
	}
	newKID := p.RotateKey()
	clk.Advance(11 * time.Second)
	if pr, err := o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{})); err != nil || pr.Role != auth.RoleAdmin {
		t.Fatalf("token of the rotated key: %+v, %v", pr, err)
	}
	if n := p.JWKSFetches(); n != 2 {
		t.Fatalf("fetches %d, want 2 (one for the new kid)", n)
	}
	// The old key is withdrawn: trusted for the rest of the cache's life, not after.
	p.Withdraw(oldKID)
	if _, err := o.VerifyBearer(ctx, old); err != nil {
		t.Errorf("old key within the cache's life: %v", err)
	}
	clk.Advance(5*time.Minute + time.Second)
	if _, err := o.VerifyBearer(ctx, old); err == nil || !strings.Contains(err.Error(), "unknown signing key") {
		t.Errorf("token of the withdrawn key after the cache's life: %v", err)
	}
	if _, err := o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{KeyID: newKID})); err != nil {
		t.Errorf("token of the published key: %v", err)
	}
	// A shorter Cache-Control max-age wins; a longer one is bounded by the configured age.
	p.SetKeysCacheControl("public, max-age=60")
	clk.Advance(5*time.Minute + time.Second)
	_, _ = o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{}))
	before := p.JWKSFetches()
	clk.Advance(61 * time.Second)
	_, _ = o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{}))
	if n := p.JWKSFetches(); n != before+1 {
		t.Errorf("max-age=60: fetches %d after 61 s, want %d", n, before+1)
	}
	p.SetKeysCacheControl("max-age=86400")
	clk.Advance(61 * time.Second)
	_, _ = o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{}))
	before = p.JWKSFetches()
	clk.Advance(4 * time.Minute)
	_, _ = o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{}))
	if n := p.JWKSFetches(); n != before {
		t.Errorf("max-age=86400: refetched within the bound")
	}
	clk.Advance(time.Minute + time.Second)
	_, _ = o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{}))
	if n := p.JWKSFetches(); n != before+1 {
		t.Errorf("max-age=86400: fetches %d past the 5 min bound, want %d", n, before+1)
	}
}

// Tokens with unknown key ids, sent by anyone, make at most one fetch of the keys per refetch
// interval; concurrent ones share it.
func TestJWKSUnknownKidFlood(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	clk := newClock()
	o := newOIDC(t, p, func(c *auth.OIDCConfig) { c.Now = clk.Now; c.KeysRefetchInterval = 30 * time.Second })
	a, _ := auth.NewAuthenticator(auth.Config{OIDC: o})
	ctx := context.Background()
	if _, err := o.VerifyBearer(ctx, p.Token(map[string]any{"sub": "u"}, testkit.TokenOptions{})); err != nil {
		t.Fatal(err)
	}
	junk := testkit.OIDCProviderKey(t)
	flood := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok := p.Token(map[string]any{"sub": "x"}, testkit.TokenOptions{Key: junk, KeyID: fmt.Sprintf("junk-%d", i)})
				if _, err := bearer(a, tok); err == nil || !errors.Is(err, auth.ErrUnauthenticated) {
					t.Errorf("junk token: %v", err)
				}
			}()
		}
		wg.Wait()
	}
	flood(20) // within the refetch interval of the first fetch: none
	if n := p.JWKSFetches(); n != 1 {
		t.Errorf("20 junk tokens right after the first fetch: %d fetches, want 1", n)
	}
	clk.Advance(31 * time.Second)
	flood(50) // 50 at once once a refetch is allowed: one, shared
	if n := p.JWKSFetches(); n != 2 {
		t.Errorf("50 concurrent junk tokens: %d fetches in all, want 2", n)
	}
	flood(20)
	if n := p.JWKSFetches(); n != 2 {
		t.Errorf("20 more junk tokens: %d fetches in all, want 2", n)
	}
}

// A provider outage: keys cached keep verifying for their life, then the API gets
// ErrProviderUnavailable (a 503), never a 401; static tokens always work; a sign-in is not
// started towards a dead provider, even after a successful discovery.
func TestOIDCProviderOutage(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	clk := newClock()
	o := newOIDC(t, p, func(c *auth.OIDCConfig) { c.Now = clk.Now; c.KeysMaxAge = time.Minute })
	tokens, _ := auth.ParseTokens("ops:admin:" + adminToken)
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens, OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := map[string]any{"sub": "u", "groups": []string{"redrive-admins"}, "exp": time.Now().Add(time.Hour).Unix()}
	if _, err := bearer(a, p.Token(user, testkit.TokenOptions{})); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AuthCodeURL(ctx, auth.NewSignIn()); err != nil {
		t.Fatal(err)
	}
	p.SetDown(true)
	if _, err := bearer(a, p.Token(user, testkit.TokenOptions{})); err != nil {
		t.Errorf("JWT of a cached key with the provider down: %v", err)
	}
	clk.Advance(11 * time.Second)
	if _, err := o.AuthCodeURL(ctx, auth.NewSignIn()); !errors.Is(err, auth.ErrProviderUnavailable) {
		t.Errorf("sign-in towards a dead provider after discovery: %v", err)
	}
	clk.Advance(time.Minute)
	if _, err := bearer(a, p.Token(user, testkit.TokenOptions{})); !errors.Is(err, auth.ErrProviderUnavailable) {
		t.Errorf("JWT once the cached keys expired with the provider down: %v, want ErrProviderUnavailable", err)
	}
	if pr, err := bearer(a, adminToken); err != nil || pr.Role != auth.RoleAdmin {
		t.Errorf("static admin token with the provider down = %+v, %v", pr, err)
	}
	p.SetDown(false)
	clk.Advance(31 * time.Second)
	if _, err := bearer(a, p.Token(user, testkit.TokenOptions{})); err != nil {
		t.Errorf("JWT once the provider is back: %v", err)
	}
	// Down from the start: discovery is retried on use.
	p2 := testkit.NewOIDCProvider(t)
	p2.SetDown(true)
	o2 := newOIDC(t, p2, func(c *auth.OIDCConfig) { c.Now = clk.Now })
	if err := o2.Check(ctx); !errors.Is(err, auth.ErrProviderUnavailable) {
		t.Errorf("Check with the provider down = %v", err)
	}
	p2.SetDown(false)
	clk.Advance(6 * time.Second)
	if err := o2.Check(ctx); err != nil {
		t.Errorf("Check once the provider is up: %v", err)
	}
}

// The claim layouts of the common providers, through a real sign-in: nested claims, roles
// only at UserInfo, groups only for the scope "groups", and a default role.
func TestOIDCClaimLayouts(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	p.AddUser(testkit.OIDCUser{ID: "kc-1", Username: "kc-realm", Password: "pw-kc-realm",
		IDClaims: map[string]any{"realm_access": map[string]any{"roles": []string{"offline_access", "redrive-admins"}}}})
	p.AddUser(testkit.OIDCUser{ID: "kc-2", Username: "kc-client", Password: "pw-kc-client",
		IDClaims: map[string]any{"resource_access": map[string]any{"redrive": map[string]any{"roles": []string{"redrive-viewers"}},
			"account": map[string]any{"roles": []string{"redrive-admins"}}}}})
	p.AddUser(testkit.OIDCUser{ID: "entra-1", Username: "entra", Password: "pw-entra",
		IDClaims: map[string]any{"roles": []string{"redrive-operators"}}})
	p.AddUser(testkit.OIDCUser{ID: "okta-1", Username: "okta", Password: "pw-okta",
		ScopeClaims: map[string]map[string]any{"groups": {"groups": []string{"Everyone", "redrive-admins"}}}})
	p.AddUser(testkit.OIDCUser{ID: "ui-1", Username: "userinfo", Password: "pw-userinfo",
		UserInfoClaims: map[string]any{"groups": []string{"redrive-operators"}}})
	p.AddUser(testkit.OIDCUser{ID: "none-1", Username: "nobody", Password: "pw-nobody"})
	cases := []struct {
		name, user, claim string
		scopes            []string
		def               auth.Role
		want              auth.Role
	}{
		{"Keycloak realm roles", "kc-realm", "realm_access.roles", nil, 0, auth.RoleAdmin},
		{"Keycloak client roles", "kc-client", "resource_access.redrive.roles", nil, 0, auth.RoleViewer},
		{"Entra ID app roles", "entra", "roles", nil, 0, auth.RoleOperator},
		{"Okta/Dex groups with the scope", "okta", "groups", []string{"openid", "profile", "email", "groups"}, 0, auth.RoleAdmin},
		{"Okta/Dex groups without the scope", "okta", "groups", nil, 0, auth.RoleNone},
		{"groups only at UserInfo", "userinfo", "groups", nil, 0, auth.RoleOperator},
		{"several paths", "kc-client", "realm_access.roles,resource_access.redrive.roles", nil, 0, auth.RoleViewer},
		{"default role", "nobody", "groups", nil, auth.RoleViewer, auth.RoleViewer},
		{"no default role", "nobody", "groups", nil, 0, auth.RoleNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logged bytes.Buffer
			o := newOIDC(t, p, func(cfg *auth.OIDCConfig) {
				cfg.RolesClaim = c.claim
				cfg.Scopes = c.scopes
				cfg.DefaultRole = c.def
				cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
			})
			done, err := signIn(t, p, o, c.user, "pw-"+c.user)
			if err != nil {
				t.Fatal(err)
			}
			// A user with none of the configured claims is a warning naming the claims there.
			warned := strings.Contains(logged.String(), "none of the configured role claims")
			if none := c.user == "nobody" || c.name == "Okta/Dex groups without the scope"; warned != none ||
				(none && !strings.Contains(logged.String(), "claims_present=")) {
				t.Errorf("warning logged %v, want %v: %s", warned, none, logged.String())
			}
			if done.Principal.Role != c.want || done.Principal.Display != c.user || done.IDToken == "" ||
				done.Principal.Name != auth.OIDCName(p.Issuer(), done.Principal.Subject, c.user) {
				t.Errorf("principal %+v, want role %s", done.Principal, c.want)
			}
		})
	}
	// The scopes asked for are the configured ones.
	scopes := p.Scopes()
	found := false
	for _, s := range scopes {
		if strings.Join(s, " ") == "openid profile email groups" {
			found = true
		}
	}
	if !found {
		t.Errorf("no authorization request asked for the configured scopes: %v", scopes)
	}
}

// A wrong client secret is refused with the provider's OAuth error in the error; an issuer
// that is not the provider's is named an issuer mismatch.
func TestOIDCProviderErrors(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	o := newOIDC(t, p, func(c *auth.OIDCConfig) { c.ClientSecret = "wrong-secret" })
	_, err := signIn(t, p, o, "alice", "alice-password")
	if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "invalid_client") {
		t.Errorf("wrong client secret: %v, want the provider's invalid_client", err)
	}
	o2 := newOIDC(t, p, func(c *auth.OIDCConfig) { c.IssuerURL = p.Issuer() + "/" })
	err = o2.Check(context.Background())
	if !errors.Is(err, auth.ErrIssuerMismatch) || !strings.Contains(err.Error(), "issuer mismatch") || !strings.Contains(err.Error(), p.Issuer()) {
		t.Errorf("issuer with a trailing slash: %v", err)
	}
	// A sign-in that works, for contrast, with the nonce checked.
	o3 := newOIDC(t, p, nil)
	if done, err := signIn(t, p, o3, "alice", "alice-password"); err != nil || done.Principal.Role != auth.RoleOperator {
		t.Errorf("sign-in: %+v, %v", done, err)
	}
}

// The sign-out address carries id_token_hint, client_id and the post-logout address.
func TestOIDCEndSessionURL(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	o := newOIDC(t, p, nil)
	u, err := o.EndSessionURL(context.Background(), "http://127.0.0.1:8080/login", "the.id.token")
	if err != nil || !strings.HasPrefix(u, p.Issuer()+"/end_session?") || !strings.Contains(u, "id_token_hint=the.id.token") ||
		!strings.Contains(u, "client_id=redrive") || !strings.Contains(u, "post_logout_redirect_uri=http%3A%2F%2F127.0.0.1%3A8080%2Flogin") {
		t.Errorf("EndSessionURL = %q, %v", u, err)
	}
}

// An OIDC subject "ada" and the static token "ada" are two principals in the audit log.
func TestAuditNamesByOrigin(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	o := newOIDC(t, p, nil)
	tokens, _ := auth.ParseTokens("ada:admin:" + adminToken)
	a, _ := auth.NewAuthenticator(auth.Config{Tokens: tokens, OIDC: o})
	static, err := bearer(a, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	sso, err := bearer(a, p.Token(map[string]any{"sub": "ada", "groups": "redrive-admins"}, testkit.TokenOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if static.Name != "token:ada" || sso.Name != "oidc:"+p.Issuer()+"#ada" || static.Name == sso.Name {
		t.Errorf("names %q and %q", static.Name, sso.Name)
	}
	if n := auth.OIDCName("https://i", "a (b)", ""); n == auth.OIDCName("https://i", "a", "b") {
		t.Errorf("OIDC names collide: %q", n)
	}
}

func TestOIDCConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []auth.OIDCConfig{
		{ClientID: "x"},
		{IssuerURL: "http://idp.example", ClientID: "x"},
		{IssuerURL: "https://idp.example"},
		{IssuerURL: "https://idp.example", ClientID: "x", ClockSkew: time.Hour},
		{IssuerURL: "https://idp.example", ClientID: "x", RolesClaim: "a..b"},
		{IssuerURL: "https://idp.example", ClientID: "x", Scopes: []string{"a b"}},
		{IssuerURL: "https://idp.example", ClientID: "x", KeysMaxAge: time.Minute, KeysRefetchInterval: time.Hour},
	} {
		if _, err := auth.NewOIDC(c); err == nil || !strings.Contains(err.Error(), "invalid OIDC config") {
			t.Errorf("%+v: %v", c, err)
		}
	}
	paths, err := auth.ParseClaimPaths(`realm_access.roles, resource_access.my\.app.roles`)
	if err != nil || len(paths) != 2 || len(paths[1]) != 3 || paths[1][1] != "my.app" || paths[1].String() != `resource_access.my\.app.roles` {
		t.Errorf("ParseClaimPaths = %v, %v", paths, err)
	}
	_ = jose.RS256
}
