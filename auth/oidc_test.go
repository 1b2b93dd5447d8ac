package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
)

func newOIDC(t *testing.T, p *testkit.OIDCProvider, mod func(*auth.OIDCConfig)) *auth.OIDC {
	t.Helper()
	cfg := auth.OIDCConfig{IssuerURL: p.Issuer(), ClientID: p.ClientID, ClientSecret: p.Secret,
		RedirectURL: "http://127.0.0.1:8080/auth/callback",
		RoleMapping: map[string]auth.Grant{"redrive-viewers": {Role: auth.RoleViewer}, "redrive-operators": {Role: auth.RoleOperator}, "redrive-admins": {Role: auth.RoleAdmin}}}
	if mod != nil {
		mod(&cfg)
	}
	o, err := auth.NewOIDC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The token cases of the API's JWT bearer tokens and what each gets.
func TestJWTBearerTokens(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	o := newOIDC(t, p, nil)
	tokens, err := auth.ParseTokens("ops:admin:" + adminToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens, OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	user := map[string]any{"sub": "u-42", "preferred_username": "carol", "groups": []string{"staff", "redrive-operators"}}
	other := testkit.OIDCProviderKey(t)
	now := time.Now()
	cases := []struct {
		name, token, want string // want: "name role" when accepted, else a part of the reason
	}{
		{"valid", p.Token(user, testkit.TokenOptions{}), "carol (u-42) operator"},
		{"expired within the skew", p.Token(user, testkit.TokenOptions{Expiry: now.Add(-20 * time.Second)}), "carol (u-42) operator"},
		{"expired", p.Token(user, testkit.TokenOptions{Expiry: now.Add(-10 * time.Minute)}), "expired"},
		{"not yet valid", p.Token(user, testkit.TokenOptions{NotBefore: now.Add(time.Hour)}), "not valid"},
		{"forged signature", p.Token(user, testkit.TokenOptions{Key: other}), "bad signature"},
		{"alg none", p.UnsignedToken(user), "not valid"},
		{"wrong audience", p.Token(user, testkit.TokenOptions{Audience: "someone-else"}), "wrong audience"},
		{"wrong issuer", p.Token(user, testkit.TokenOptions{Issuer: "https://evil.example"}), "wrong issuer"},
		{"admin by group", p.Token(map[string]any{"sub": "u-1", "groups": "redrive-admins"}, testkit.TokenOptions{}), "u-1 admin"},
		{"no mapped group", p.Token(map[string]any{"sub": "u-2", "name": "Dan", "groups": []string{"x"}}, testkit.TokenOptions{}), "Dan (u-2) none"},
		{"no subject", p.Token(map[string]any{"groups": []string{"redrive-admins"}}, testkit.TokenOptions{}), "no subject"},
		{"static token still works", adminToken, "ops admin"},
	}
	for _, c := range cases {
		req := httptest.NewRequest("GET", "/api/v1/failures", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		pr, err := a.Authenticate(req)
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
		t.Logf("%-26s -> %s", c.name, got)
	}
}

// A rotated key is fetched when a token names it; tokens of the old key keep working while it
// is published.
func TestJWTKeyRotation(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	o := newOIDC(t, p, nil)
	ctx := context.Background()
	user := map[string]any{"sub": "u", "groups": []string{"redrive-viewers"}}
	old := p.Token(user, testkit.TokenOptions{})
	if _, err := o.VerifyBearer(ctx, old); err != nil {
		t.Fatal(err)
	}
	p.RotateKey()
	if pr, err := o.VerifyBearer(ctx, p.Token(user, testkit.TokenOptions{})); err != nil || pr.Role != auth.RoleViewer {
		t.Errorf("token of the new key: %+v, %v", pr, err)
	}
	if _, err := o.VerifyBearer(ctx, old); err != nil {
		t.Errorf("token of the old key while it is published: %v", err)
	}
}

// An unreachable provider at startup is retried later; it never locks out static tokens.
func TestOIDCProviderOutage(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	o := newOIDC(t, p, func(c *auth.OIDCConfig) { c.Now = func() time.Time { return time.Unix(0, now.Load()) } })
	tokens, _ := auth.ParseTokens("ops:admin:" + adminToken)
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens, OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	p.SetDown(true)
	ctx := context.Background()
	if err := o.Check(ctx); !errors.Is(err, auth.ErrProviderUnavailable) {
		t.Errorf("Check with the provider down = %v", err)
	}
	user := map[string]any{"sub": "u", "groups": []string{"redrive-admins"}}
	jwt := p.Token(user, testkit.TokenOptions{})
	req := func(token string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return r
	}
	if _, err := a.Authenticate(req(jwt)); !errors.Is(err, auth.ErrProviderUnavailable) {
		t.Errorf("JWT with the provider down = %v", err)
	}
	if pr, err := a.Authenticate(req(adminToken)); err != nil || pr.Role != auth.RoleAdmin {
		t.Errorf("static admin token with the provider down = %+v, %v", pr, err)
	}
	// Back up: retried after the pause between attempts.
	p.SetDown(false)
	now.Add(int64(6 * time.Second))
	if pr, err := a.Authenticate(req(jwt)); err != nil || pr.Role != auth.RoleAdmin {
		t.Errorf("JWT once the provider is back = %+v, %v", pr, err)
	}
	// Down again later: keys already fetched still verify.
	p.SetDown(true)
	if _, err := a.Authenticate(req(p.Token(user, testkit.TokenOptions{}))); err != nil {
		t.Errorf("JWT of a known key with the provider down = %v", err)
	}
}

// The UI's sign-in: authorization code with PKCE, state and nonce, against the provider.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	o := newOIDC(t, p, nil)
	ctx := context.Background()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn := func(s auth.SignIn) (code, state string) {
		u, err := o.AuthCodeURL(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(u, "code_challenge_method=S256") || !strings.Contains(u, "nonce=") {
			t.Errorf("authorization URL %s", u)
		}
		resp, err := noFollow.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return back.Query().Get("code"), back.Query().Get("state")
	}
	s := auth.NewSignIn()
	code, state := signIn(s)
	if state != s.State {
		t.Errorf("state %q, want %q", state, s.State)
	}
	pr, exp, err := o.Exchange(ctx, s, code)
	if err != nil || pr.Name != "alice (user-1)" || pr.Role != auth.RoleOperator || pr.Subject != "user-1" || exp.Before(time.Now()) {
		t.Fatalf("Exchange = %+v, %v, %v", pr, exp, err)
	}
	// A code used twice, a wrong PKCE verifier and a wrong nonce are refused.
	if _, _, err := o.Exchange(ctx, s, code); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("code reused: %v", err)
	}
	s2 := auth.NewSignIn()
	code2, _ := signIn(s2)
	wrong := s2
	wrong.Verifier = auth.NewSignIn().Verifier
	if _, _, err := o.Exchange(ctx, wrong, code2); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("wrong verifier: %v", err)
	}
	s3 := auth.NewSignIn()
	code3, _ := signIn(s3)
	s3.Nonce = "other"
	if _, _, err := o.Exchange(ctx, s3, code3); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Errorf("wrong nonce: %v", err)
	}
	// The provider going down between the redirect and the callback is an outage, not a refusal.
	s4 := auth.NewSignIn()
	code4, _ := signIn(s4)
	p.SetDown(true)
	_, _, err = o.Exchange(ctx, s4, code4)
	p.SetDown(false)
	if !errors.Is(err, auth.ErrProviderUnavailable) || errors.Is(err, auth.ErrUnauthenticated) || strings.Contains(err.Error(), code4) {
		t.Errorf("exchange while the provider is down: %v", err)
	}
}

func TestOIDCConfigErrors(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]auth.OIDCConfig{
		"no issuer":      {ClientID: "c"},
		"not a URL":      {IssuerURL: "::", ClientID: "c"},
		"plain http":     {IssuerURL: "http://idp.example", ClientID: "c"},
		"no client":      {IssuerURL: "https://idp.example"},
		"bad redirect":   {IssuerURL: "https://idp.example", ClientID: "c", RedirectURL: "/relative"},
		"skew too large": {IssuerURL: "https://idp.example", ClientID: "c", ClockSkew: time.Hour},
	} {
		if _, err := auth.NewOIDC(c); err == nil || !strings.Contains(err.Error(), "invalid OIDC config") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: "https://idp.example", ClientID: "c"}); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// The provider's end-session address carries the client and where to come back; a provider
// that announces none gives "".
func TestOIDCEndSessionURL(t *testing.T) {
	p := testkit.NewOIDCProvider(t)
	o := newOIDC(t, p, nil)
	got, err := o.EndSessionURL(context.Background(), "https://redrive.example/login")
	want := p.Issuer() + "/logout?client_id=" + p.ClientID + "&post_logout_redirect_uri=https%3A%2F%2Fredrive.example%2Flogin"
	if err != nil || got != want {
		t.Errorf("EndSessionURL = %q, %v; want %q", got, err, want)
	}
	if o.Origin() != "http://127.0.0.1:8080" {
		t.Errorf("Origin = %q", o.Origin())
	}
	none := testkit.NewOIDCProvider(t)
	none.WithoutEndSession()
	if got, err := newOIDC(t, none, nil).EndSessionURL(context.Background(), ""); got != "" || err != nil {
		t.Errorf("without an end_session_endpoint: %q, %v", got, err)
	}
	down := testkit.NewOIDCProvider(t)
	down.SetDown(true)
	if _, err := newOIDC(t, down, nil).EndSessionURL(context.Background(), ""); !errors.Is(err, auth.ErrProviderUnavailable) {
		t.Errorf("provider down: %v", err)
	}
}
