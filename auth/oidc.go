package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// MethodOIDC is how a principal signed in with OpenID Connect (the UI), or presented a JWT
// access token of the configured issuer (the API).
const MethodOIDC = "oidc"

// Defaults and bounds of OIDCConfig.
const (
	DefaultRolesClaim = "groups"
	DefaultClockSkew  = time.Minute
	MaxClockSkew      = 5 * time.Minute
	// rediscoverEvery bounds how often an unreachable provider's discovery is retried.
	rediscoverEvery = 5 * time.Second
)

// ErrProviderUnavailable means the OpenID provider could not be reached (discovery or its
// keys); tokens of other kinds still work.
var ErrProviderUnavailable = errors.New("OpenID provider unavailable")

// OIDCConfig configures OpenID Connect: sign-in for the UI (authorization code flow with PKCE)
// and JWT bearer tokens for the API, from one issuer.
type OIDCConfig struct {
	// IssuerURL is the provider's issuer (discovery at IssuerURL/.well-known/openid-configuration).
	// Required.
	IssuerURL string
	// ClientID is redrive's client at the provider. Required.
	ClientID string
	// ClientSecret is the client's secret; empty for a public client (PKCE alone).
	ClientSecret string
	// RedirectURL is the UI's callback, e.g. https://redrive.example/auth/callback. Required
	// for the UI's sign-in.
	RedirectURL string
	// Audience is the audience API bearer tokens must name. Defaults to ClientID.
	Audience string
	// RolesClaim names the claim holding the user's groups or roles (a string or an array of
	// strings). Defaults to "groups".
	RolesClaim string
	// RoleMapping maps a claim value to a grant; a user gets the highest role, and the payload
	// permission when one grants it. See ParseProxyRoles for the "value=role[+payload],…"
	// syntax.
	RoleMapping map[string]Grant
	// DefaultRole is the role of a user whose claim maps to none. Defaults to RoleNone.
	DefaultRole Role
	// ClockSkew is how far past its expiry a token is still accepted. Defaults to 1 minute, at
	// most 5 minutes.
	ClockSkew time.Duration
	// Scopes are asked for at sign-in besides openid. Defaults to profile and email.
	Scopes []string
	// HTTPClient reaches the provider. Defaults to a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// validate checks c without reaching the provider, and fills in the defaults.
func (c *OIDCConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("invalid OIDC config: "+format, args...))
	}
	u, err := url.Parse(c.IssuerURL)
	switch {
	case c.IssuerURL == "":
		bad("the issuer URL is required")
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		bad("issuer URL %q is not an http(s) URL", c.IssuerURL)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		bad("issuer URL %q must use https (plain http only on a loopback address)", c.IssuerURL)
	}
	if c.ClientID == "" {
		bad("the client id is required")
	}
	if c.RedirectURL != "" {
		if r, err := url.Parse(c.RedirectURL); err != nil || r.Host == "" || (r.Scheme != "https" && r.Scheme != "http") {
			bad("redirect URL %q is not an http(s) URL", c.RedirectURL)
		}
	}
	if c.ClockSkew < 0 || c.ClockSkew > MaxClockSkew {
		bad("clock skew %s is not between 0 and %s", c.ClockSkew, MaxClockSkew)
	}
	for value, g := range c.RoleMapping {
		if value == "" || g.Role < RoleNone || g.Role > RoleAdmin {
			bad("role mapping %q=%d", value, g.Role)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if c.Audience == "" {
		c.Audience = c.ClientID
	}
	if c.RolesClaim == "" {
		c.RolesClaim = DefaultRolesClaim
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.Scopes == nil {
		c.Scopes = []string{"profile", "email"}
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

func isLoopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}

// OIDC verifies tokens of one OpenID provider and runs the UI's sign-in flow. It discovers the
// provider lazily and again after a failure (at most every 5 s), so that an unreachable
// provider neither stops the service from starting nor locks out other kinds of sign-in. Key
// rotation is followed: a token signed with an unknown key makes it fetch the keys again.
type OIDC struct {
	cfg OIDCConfig

	mu        sync.Mutex
	provider  *oidc.Provider
	verifiers map[string]*oidc.IDTokenVerifier
	tried     time.Time
	lastErr   error
}

// NewOIDC returns an OIDC for cfg; a configuration that is not valid is an error naming what
// is wrong. It does not reach the provider (see Check).
func NewOIDC(cfg OIDCConfig) (*OIDC, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &OIDC{cfg: cfg, verifiers: map[string]*oidc.IDTokenVerifier{}}, nil
}

// Check discovers the provider now, for a startup check: an error wraps
// ErrProviderUnavailable.
func (o *OIDC) Check(ctx context.Context) error {
	_, err := o.discover(ctx)
	return err
}

func (o *OIDC) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	if now := o.cfg.Now(); !o.tried.IsZero() && now.Sub(o.tried) < rediscoverEvery {
		return nil, o.lastErr
	}
	o.tried = o.cfg.Now()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.cfg.HTTPClient), o.cfg.IssuerURL)
	if err != nil {
		o.lastErr = fmt.Errorf("%w: discovery at %s: %v", ErrProviderUnavailable, o.cfg.IssuerURL, err)
		return nil, o.lastErr
	}
	o.provider = p
	return p, nil
}

// verifier returns the verifier of tokens for audience. Verifiers share the provider's key
// set, so keys fetched once keep verifying while the provider is unreachable.
func (o *OIDC) verifier(ctx context.Context, audience string) (*oidc.IDTokenVerifier, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if v, ok := o.verifiers[audience]; ok {
		return v, nil
	}
	skew := o.cfg.ClockSkew
	v := p.Verifier(&oidc.Config{
		ClientID: audience,
		// Accept a token up to the skew past its expiry.
		Now: func() time.Time { return o.cfg.Now().Add(-skew) },
	})
	o.verifiers[audience] = v
	return v, nil
}

// VerifyBearer verifies a JWT access token of the issuer for the API: signature (a key of the
// provider's JWKS; "alg": "none" and forged signatures fail), issuer, audience (Audience) and
// expiry (with the clock skew). It returns the principal the token's claims name, or an error
// wrapping ErrUnauthenticated (or ErrProviderUnavailable). The error never holds the token.
func (o *OIDC) VerifyBearer(ctx context.Context, raw string) (Principal, error) {
	v, err := o.verifier(ctx, o.cfg.Audience)
	if err != nil {
		return Principal{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: the JWT is not valid: %s", ErrUnauthenticated, verifyReason(err))
	}
	return o.principal(tok)
}

// verifyReason names why a token failed verification, without quoting it.
func verifyReason(err error) string {
	var expired *oidc.TokenExpiredError
	switch s := err.Error(); {
	case errors.As(err, &expired):
		return "expired"
	case strings.Contains(s, "audience"):
		return "wrong audience"
	case strings.Contains(s, "issued by a different provider"), strings.Contains(s, "issuer"):
		return "wrong issuer"
	case strings.Contains(s, "signature"), strings.Contains(s, "signing"), strings.Contains(s, "algorithm"):
		return "bad signature"
	case strings.Contains(s, "before"):
		return "not valid yet"
	case strings.Contains(s, "malformed"), strings.Contains(s, "parse"):
		return "malformed"
	}
	return "refused"
}

// claims are the claims redrive reads from a token.
type claims struct {
	Subject           string `json:"sub"`
	Name              string `json:"name"`
	PreferredUsername string `json:"preferred_username"`
	Email             string `json:"email"`
	Nonce             string `json:"nonce"`
}

// principal maps a verified token's claims to a principal: the subject plus a display name
// for the audit log, and the highest role its roles claim maps to.
func (o *OIDC) principal(tok *oidc.IDToken) (Principal, error) {
	var c claims
	var all map[string]any
	if err := tok.Claims(&c); err != nil {
		return Principal{}, fmt.Errorf("%w: the token's claims do not decode", ErrUnauthenticated)
	}
	if err := tok.Claims(&all); err != nil {
		return Principal{}, fmt.Errorf("%w: the token's claims do not decode", ErrUnauthenticated)
	}
	sub := strings.TrimSpace(cleanName(c.Subject))
	if sub == "" {
		return Principal{}, fmt.Errorf("%w: the token has no subject", ErrUnauthenticated)
	}
	display := ""
	for _, s := range []string{c.PreferredUsername, c.Name, c.Email} {
		if s = strings.TrimSpace(cleanName(s)); s != "" {
			display = s
			break
		}
	}
	name := sub
	if display != "" && display != sub {
		name = display + " (" + sub + ")"
	}
	if utf8.RuneCountInString(name) > 200 {
		name = string([]rune(name)[:200])
	}
	g := grantOf(claimValues(all[o.cfg.RolesClaim]), o.cfg.RoleMapping, Grant{Role: o.cfg.DefaultRole})
	return Principal{Name: name, Role: g.Role, Payload: g.Payload, Method: MethodOIDC, Subject: sub}, nil
}

// claimValues returns a claim that is a string or an array of strings as strings.
func claimValues(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// SignIn is one sign-in in progress: the values the UI keeps (in a short-lived cookie) between
// sending the browser to the provider and the callback.
type SignIn struct {
	// State guards the callback against forgery; Nonce binds the ID token to this sign-in;
	// Verifier is the PKCE code verifier.
	State, Nonce, Verifier string
}

// NewSignIn returns fresh random state, nonce and PKCE verifier.
func NewSignIn() SignIn {
	return SignIn{State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier()}
}

func (o *OIDC) oauth2Config(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID}, o.cfg.Scopes...),
	}
}

// EndSessionURL returns the provider's address that ends the user's session there (OpenID
// Connect RP-Initiated Logout 1.0: its end_session_endpoint with client_id and, when not
// empty, post_logout_redirect_uri), or "" when the provider announces none. The UI sends the
// browser there after it ended its own session, so that the next sign-in asks for credentials
// again. Errors wrap ErrProviderUnavailable.
func (o *OIDC) EndSessionURL(ctx context.Context, postLogoutRedirect string) (string, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return "", err
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&meta); err != nil || meta.EndSession == "" {
		return "", nil
	}
	u, err := url.Parse(meta.EndSession)
	if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) || u.Host == "" {
		return "", fmt.Errorf("%w: its end_session_endpoint %q is not an https address", ErrProviderUnavailable, meta.EndSession)
	}
	q := u.Query()
	q.Set("client_id", o.cfg.ClientID)
	if postLogoutRedirect != "" {
		q.Set("post_logout_redirect_uri", postLogoutRedirect)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Origin returns the scheme and host of the UI's RedirectURL ("" without one): where the
// provider sends the browser back.
func (o *OIDC) Origin() string {
	u, err := url.Parse(o.cfg.RedirectURL)
	if err != nil || o.cfg.RedirectURL == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// AuthCodeURL returns the provider's authorization address for s (code flow, PKCE S256).
func (o *OIDC) AuthCodeURL(ctx context.Context, s SignIn) (string, error) {
	if o.cfg.RedirectURL == "" {
		return "", errors.New("OIDC sign-in needs a redirect URL")
	}
	p, err := o.discover(ctx)
	if err != nil {
		return "", err
	}
	return o.oauth2Config(p).AuthCodeURL(s.State, oidc.Nonce(s.Nonce), oauth2.S256ChallengeOption(s.Verifier)), nil
}

// Exchange finishes sign-in s with the code of the callback: it exchanges the code (with the
// PKCE verifier), verifies the ID token (signature, issuer, audience ClientID, expiry, nonce)
// and returns its principal and the token's expiry. Errors wrap ErrUnauthenticated or
// ErrProviderUnavailable.
func (o *OIDC) Exchange(ctx context.Context, s SignIn, code string) (Principal, time.Time, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	tok, err := o.oauth2Config(p).Exchange(oidc.ClientContext(ctx, o.cfg.HTTPClient), code, oauth2.VerifierOption(s.Verifier))
	if err != nil {
		return Principal{}, time.Time{}, exchangeError(err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Principal{}, time.Time{}, fmt.Errorf("%w: the provider sent no ID token", ErrUnauthenticated)
	}
	v, err := o.verifier(ctx, o.cfg.ClientID)
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	id, err := v.Verify(ctx, raw)
	if err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("%w: the ID token is not valid: %s", ErrUnauthenticated, verifyReason(err))
	}
	var c claims
	if err := id.Claims(&c); err != nil || c.Nonce != s.Nonce {
		return Principal{}, time.Time{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrUnauthenticated)
	}
	pr, err := o.principal(id)
	return pr, id.Expiry, err
}

// exchangeError classifies a failed code exchange: a 4xx answer of the token endpoint is a
// refusal (ErrUnauthenticated); no answer or a 5xx is the provider being unavailable
// (ErrProviderUnavailable), so that the UI can say so and offer its token form. The error
// never holds the code or a token.
func exchangeError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
		return fmt.Errorf("%w: the provider refused the code (HTTP %d)", ErrUnauthenticated, re.Response.StatusCode)
	}
	if errors.As(err, &re) && re.Response != nil {
		return fmt.Errorf("%w: the token endpoint answered HTTP %d", ErrProviderUnavailable, re.Response.StatusCode)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%w: the token endpoint could not be reached: %v", ErrProviderUnavailable, ue.Err)
	}
	return fmt.Errorf("%w: the code exchange failed", ErrUnauthenticated)
}

// looksLikeJWT reports whether a bearer token has the shape of a JWS compact serialization.
func looksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && !strings.ContainsAny(s, " \t")
}
