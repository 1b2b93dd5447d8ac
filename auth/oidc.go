package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"
)

// MethodOIDC is how a principal signed in with OpenID Connect (the UI), or presented a JWT
// access token of the configured issuer (the API).
const MethodOIDC = "oidc"

// Defaults and bounds of OIDCConfig.
const (
	DefaultRolesClaim = "groups"
	DefaultClockSkew  = time.Minute
	MaxClockSkew      = 5 * time.Minute
	// DefaultKeysMaxAge bounds how long the provider's keys are used before they are fetched
	// again (a shorter Cache-Control max-age of the provider wins).
	DefaultKeysMaxAge = 5 * time.Minute
	// DefaultKeysRefetchInterval is how often, at most, a token with an unknown key id makes
	// the keys be fetched again.
	DefaultKeysRefetchInterval = 30 * time.Second
	// rediscoverEvery bounds how often an unreachable provider's discovery is retried.
	rediscoverEvery = 5 * time.Second
	// reachableFor is how long a successful contact with the provider counts as proof that it
	// is reachable, before a sign-in sends a browser there.
	reachableFor = 10 * time.Second
)

// DefaultScopes are the scopes asked for at sign-in by default.
var DefaultScopes = []string{"openid", "profile", "email"}

// Errors of OpenID Connect.
var (
	// ErrProviderUnavailable means the OpenID provider could not be reached (discovery, its
	// keys, its token or UserInfo endpoint) or could not be used; tokens of other kinds still
	// work.
	ErrProviderUnavailable = errors.New("OpenID provider unavailable")
	// ErrIssuerMismatch means the provider's discovery document names another issuer than the
	// configured one; it comes wrapped in ErrProviderUnavailable.
	ErrIssuerMismatch = errors.New("issuer mismatch")
)

// OIDCConfig configures OpenID Connect: sign-in for the UI (authorization code flow with PKCE)
// and JWT access tokens for the API, from one issuer.
type OIDCConfig struct {
	// IssuerURL is the provider's issuer (discovery at IssuerURL/.well-known/openid-configuration),
	// exactly as the provider writes it into its tokens. Required.
	IssuerURL string
	// ClientID is redrive's client at the provider. Required.
	ClientID string
	// ClientSecret is the client's secret; empty for a public client (PKCE alone).
	ClientSecret string
	// RedirectURL is the UI's callback, e.g. https://redrive.example/auth/callback. Required
	// for the UI's sign-in.
	RedirectURL string
	// Audience is the audience API access tokens must name. Defaults to ClientID, in which
	// case only tokens typed as access tokens ("typ": "at+jwt", RFC 9068) are accepted: an ID
	// token names the client id too. With an audience of its own (Okta's "api://default", an
	// Entra ID API's application id URI) a JWT that names it is accepted when it is not an ID
	// token.
	Audience string
	// RolesClaim names the claims holding the user's groups or roles: comma-separated claim
	// paths (see ParseClaimPaths), e.g. "groups", "roles", "realm_access.roles",
	// "resource_access.redrive.roles". Values found at any of them count. Defaults to "groups".
	RolesClaim string
	// RoleMapping maps a claim value to a grant; a user gets the highest role, and the payload
	// permission when one grants it. See ParseProxyRoles for the "value=role[+payload],…"
	// syntax.
	RoleMapping map[string]Grant
	// DefaultRole is the role of a user whose claims map to none. Defaults to RoleNone
	// (signed in, but refused everything).
	DefaultRole Role
	// ClockSkew is how far past its expiry, and before its nbf and iat, a token is accepted;
	// exactly this much, no other leeway. Defaults to 1 minute, at most 5 minutes.
	ClockSkew time.Duration
	// Scopes are asked for at sign-in ("openid" is always added). Defaults to openid, profile
	// and email. Dex and Okta's org server send groups only for the scope "groups".
	Scopes []string
	// KeysMaxAge bounds how long fetched keys are used: the provider's Cache-Control max-age
	// when shorter, else this. A key withdrawn from the provider's key set is refused at the
	// latest this long after. Defaults to 5 minutes.
	KeysMaxAge time.Duration
	// KeysRefetchInterval is how often, at most, a token whose key id is unknown makes the
	// keys be fetched again (concurrent ones share one fetch). Defaults to 30 seconds, at most
	// KeysMaxAge.
	KeysRefetchInterval time.Duration
	// HTTPClient reaches the provider. Defaults to a client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger receives warnings about tokens (a signed-in user without any of the role
	// claims). Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// validate checks c without reaching the provider, and fills in the defaults.
func (c *OIDCConfig) validate() ([]ClaimPath, error) {
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
	if c.DefaultRole < RoleNone || c.DefaultRole > RoleAdmin {
		bad("default role %d", c.DefaultRole)
	}
	if c.RolesClaim == "" {
		c.RolesClaim = DefaultRolesClaim
	}
	paths, err := ParseClaimPaths(c.RolesClaim)
	if err != nil {
		bad("roles claim: %v", err)
	} else if len(paths) == 0 {
		bad("roles claim %q names no claim", c.RolesClaim)
	}
	if c.KeysMaxAge == 0 {
		c.KeysMaxAge = DefaultKeysMaxAge
	}
	if c.KeysRefetchInterval == 0 {
		c.KeysRefetchInterval = min(DefaultKeysRefetchInterval, c.KeysMaxAge)
	}
	if c.KeysMaxAge < time.Second || c.KeysMaxAge > 24*time.Hour {
		bad("keys max age %s is not between 1s and 24h", c.KeysMaxAge)
	}
	if c.KeysRefetchInterval < 0 || c.KeysRefetchInterval > c.KeysMaxAge {
		bad("keys refetch interval %s is not between 0 and the keys max age %s", c.KeysRefetchInterval, c.KeysMaxAge)
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			bad("scope %q is not a scope token", s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.Audience == "" {
		c.Audience = c.ClientID
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if len(c.Scopes) == 0 {
		c.Scopes = DefaultScopes
	}
	if !contains(c.Scopes, "openid") {
		c.Scopes = append([]string{"openid"}, c.Scopes...)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return paths, nil
}

func isLoopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}

// discovery is what redrive reads from the provider's discovery document.
type discovery struct {
	Issuer        string `json:"issuer"`
	AuthURL       string `json:"authorization_endpoint"`
	TokenURL      string `json:"token_endpoint"`
	JWKSURL       string `json:"jwks_uri"`
	UserInfoURL   string `json:"userinfo_endpoint"`
	EndSessionURL string `json:"end_session_endpoint"`

	keys *keySet
}

// OIDC verifies tokens of one OpenID provider and runs the UI's sign-in flow. It discovers the
// provider lazily and again after a failure (at most every 5 s), so that an unreachable
// provider neither stops the service from starting nor locks out other kinds of sign-in. Its
// keys are cached for a bounded lifetime (see OIDCConfig.KeysMaxAge); go-oidc and go-jose
// leeways play no part: times are checked with exactly OIDCConfig.ClockSkew.
type OIDC struct {
	cfg   OIDCConfig
	paths []ClaimPath

	probe singleflight.Group

	mu      sync.Mutex
	doc     *discovery
	tried   time.Time
	lastErr error
	// contact is when the provider last answered (Unix nanoseconds).
	contact atomic.Int64
}

// NewOIDC returns an OIDC for cfg; a configuration that is not valid is an error naming what
// is wrong. It does not reach the provider (see Check).
func NewOIDC(cfg OIDCConfig) (*OIDC, error) {
	paths, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &OIDC{cfg: cfg, paths: paths}, nil
}

// Issuer returns the configured issuer.
func (o *OIDC) Issuer() string { return o.cfg.IssuerURL }

// Check discovers the provider now, for a startup check: an error wraps
// ErrProviderUnavailable (and ErrIssuerMismatch when the provider names another issuer).
func (o *OIDC) Check(ctx context.Context) error {
	_, err := o.discover(ctx)
	return err
}

func (o *OIDC) discover(ctx context.Context) (*discovery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.doc != nil {
		return o.doc, nil
	}
	if now := o.cfg.Now(); !o.tried.IsZero() && now.Sub(o.tried) < rediscoverEvery {
		return nil, o.lastErr
	}
	o.tried = o.cfg.Now()
	d, err := o.fetchDiscovery(ctx)
	if err != nil {
		o.lastErr = err
		return nil, err
	}
	d.keys = &keySet{url: d.JWKSURL, client: o.cfg.HTTPClient, now: o.cfg.Now,
		maxAge: o.cfg.KeysMaxAge, refetchEvery: o.cfg.KeysRefetchInterval}
	o.doc = d
	return d, nil
}

func (o *OIDC) wellKnown() string {
	return strings.TrimSuffix(o.cfg.IssuerURL, "/") + "/.well-known/openid-configuration"
}

// fetchDiscovery reads and checks the discovery document.
func (o *OIDC) fetchDiscovery(ctx context.Context) (*discovery, error) {
	where := o.wellKnown()
	body, err := o.get(ctx, where, "")
	if err != nil {
		return nil, fmt.Errorf("%w: discovery at %s: %v", ErrProviderUnavailable, where, err)
	}
	var d discovery
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("%w: discovery at %s: the document does not decode: %v", ErrProviderUnavailable, where, err)
	}
	if d.Issuer != o.cfg.IssuerURL {
		hint := ""
		if strings.Contains(d.Issuer, "sts.windows.net") || strings.Contains(o.cfg.IssuerURL, "login.microsoftonline.com") {
			hint = " (Microsoft Entra ID: v2.0 tokens are issued by https://login.microsoftonline.com/<tenant>/v2.0, v1 tokens by https://sts.windows.net/<tenant>/)"
		}
		return nil, fmt.Errorf("%w: %w: the discovery document at %s names issuer %q, but the configured issuer is %q; they must be equal, trailing slash included%s",
			ErrProviderUnavailable, ErrIssuerMismatch, where, d.Issuer, o.cfg.IssuerURL, hint)
	}
	if d.AuthURL == "" || d.TokenURL == "" || d.JWKSURL == "" {
		return nil, fmt.Errorf("%w: discovery at %s: authorization_endpoint, token_endpoint or jwks_uri is missing", ErrProviderUnavailable, where)
	}
	return &d, nil
}

// get reads a provider's address, with a bearer token when not empty.
func (o *OIDC) get(ctx context.Context, addr, bearer string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	o.contact.Store(o.cfg.Now().UnixNano())
	return body, nil
}

// Reachable reports whether the provider answers now: a contact within the last 10 s counts,
// else its discovery document is read again (once for all concurrent callers). The UI asks
// before it sends a browser to the provider, so that an outage after a successful discovery
// shows the sign-in page with a 503 instead of sending the browser to a dead address. The
// error wraps ErrProviderUnavailable.
func (o *OIDC) Reachable(ctx context.Context) error {
	if _, err := o.discover(ctx); err != nil {
		return err
	}
	if o.cfg.Now().Sub(time.Unix(0, o.contact.Load())) < reachableFor {
		return nil
	}
	_, err, _ := o.probe.Do("probe", func() (any, error) {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if _, err := o.get(pctx, o.wellKnown(), ""); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrProviderUnavailable, o.wellKnown(), err)
		}
		return nil, nil
	})
	return err
}

// VerifyBearer verifies a JWT access token of the issuer for the API: signature (a key of the
// provider's key set; "alg": "none", HMAC and forged signatures fail), issuer, audience,
// that it is an access token (see OIDCConfig.Audience), and exp/nbf/iat with exactly the
// clock skew. It returns the principal the token's claims name, or an error wrapping
// ErrUnauthenticated, or ErrProviderUnavailable when its keys cannot be fetched. The error
// never holds the token.
func (o *OIDC) VerifyBearer(ctx context.Context, raw string) (Principal, error) {
	tok, err := o.verify(ctx, raw, accessToken)
	if err != nil {
		return Principal{}, err
	}
	return o.principal(tok.claims)
}

// principal maps verified claims to a principal: the issuer and subject (with a display name)
// for the audit log, and the highest role the role claims map to.
func (o *OIDC) principal(claims map[string]any) (Principal, error) {
	sub, _ := claims["sub"].(string)
	sub = strings.TrimSpace(cleanName(sub))
	if sub == "" {
		return Principal{}, fmt.Errorf("%w: the token has no subject", ErrUnauthenticated)
	}
	display := ""
	for _, k := range []string{"preferred_username", "name", "email", "upn"} {
		if s, _ := claims[k].(string); strings.TrimSpace(cleanName(s)) != "" {
			display = strings.TrimSpace(cleanName(s))
			break
		}
	}
	values, _ := roleValues(claims, o.paths)
	g := grantOf(values, o.cfg.RoleMapping, Grant{Role: o.cfg.DefaultRole})
	shown := display
	if shown == "" {
		shown = sub
	}
	return Principal{Name: OIDCName(o.cfg.IssuerURL, sub, display), Display: shown, Role: g.Role, Payload: g.Payload,
		Method: MethodOIDC, Subject: sub}, nil
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

func (o *OIDC) oauth2Config(d *discovery) *oauth2.Config {
	return &oauth2.Config{
		ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
		Endpoint: oauth2.Endpoint{AuthURL: d.AuthURL, TokenURL: d.TokenURL}, Scopes: o.cfg.Scopes,
	}
}

// EndSessionURL returns the provider's address that ends the user's session there (OpenID
// Connect RP-Initiated Logout 1.0: its end_session_endpoint with client_id, id_token_hint when
// idTokenHint is not empty, and post_logout_redirect_uri when not empty), or "" when the
// provider announces none. The UI sends the browser there after it ended its own session, so
// that the next sign-in asks for credentials again. Errors wrap ErrProviderUnavailable.
func (o *OIDC) EndSessionURL(ctx context.Context, postLogoutRedirect, idTokenHint string) (string, error) {
	d, err := o.discover(ctx)
	if err != nil {
		return "", err
	}
	if d.EndSessionURL == "" {
		return "", nil
	}
	u, err := url.Parse(d.EndSessionURL)
	if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) || u.Host == "" {
		return "", fmt.Errorf("%w: its end_session_endpoint %q is not an https address", ErrProviderUnavailable, d.EndSessionURL)
	}
	q := u.Query()
	q.Set("client_id", o.cfg.ClientID)
	if idTokenHint != "" {
		q.Set("id_token_hint", idTokenHint)
	}
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

// AuthCodeURL returns the provider's authorization address for s (code flow, PKCE S256),
// after making sure the provider is reachable (see Reachable).
func (o *OIDC) AuthCodeURL(ctx context.Context, s SignIn) (string, error) {
	if o.cfg.RedirectURL == "" {
		return "", errors.New("OIDC sign-in needs a redirect URL")
	}
	d, err := o.discover(ctx)
	if err != nil {
		return "", err
	}
	if err := o.Reachable(ctx); err != nil {
		return "", err
	}
	return o.oauth2Config(d).AuthCodeURL(s.State, oauth2.SetAuthURLParam("nonce", s.Nonce), oauth2.S256ChallengeOption(s.Verifier)), nil
}

// SignedIn is the outcome of a finished sign-in.
type SignedIn struct {
	// Principal is the signed-in user.
	Principal Principal
	// Expiry is the ID token's expiry.
	Expiry time.Time
	// IDToken is the raw ID token, kept to be sent as id_token_hint at sign-out.
	IDToken string
}

// Exchange finishes sign-in s with the code of the callback: it exchanges the code (with the
// PKCE verifier), verifies the ID token (signature, issuer, audience ClientID, times, nonce),
// reads the role claims from it and, when it holds none of them, from the UserInfo endpoint,
// and returns the principal. A user whose token and UserInfo hold none of the configured role
// claims is logged as a warning (the roles claim or the scopes are likely misconfigured).
// Errors wrap ErrUnauthenticated or ErrProviderUnavailable; a refusal of the token endpoint
// names the provider's OAuth error (e.g. invalid_client).
func (o *OIDC) Exchange(ctx context.Context, s SignIn, code string) (SignedIn, error) {
	d, err := o.discover(ctx)
	if err != nil {
		return SignedIn{}, err
	}
	tok, err := o.oauth2Config(d).Exchange(context.WithValue(ctx, oauth2.HTTPClient, o.cfg.HTTPClient), code, oauth2.VerifierOption(s.Verifier))
	if err != nil {
		return SignedIn{}, exchangeError(err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return SignedIn{}, fmt.Errorf("%w: the provider sent no ID token", ErrUnauthenticated)
	}
	id, err := o.verify(ctx, raw, idToken)
	if err != nil {
		return SignedIn{}, err
	}
	if nonce, _ := id.claims["nonce"].(string); nonce != s.Nonce {
		return SignedIn{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrUnauthenticated)
	}
	claims := id.claims
	if _, found := roleValues(claims, o.paths); !found && d.UserInfoURL != "" && tok.AccessToken != "" {
		claims, err = o.withUserInfo(ctx, d, tok.AccessToken, claims)
		if err != nil {
			return SignedIn{}, err
		}
	}
	p, err := o.principal(claims)
	if err != nil {
		return SignedIn{}, err
	}
	if _, found := roleValues(claims, o.paths); !found {
		o.cfg.Logger.Warn("OIDC: the signed-in user's ID token and UserInfo hold none of the configured role claims; check -oidc-roles-claim and -oidc-scopes",
			"principal", p.Name, "roles_claim", o.cfg.RolesClaim, "scopes", strings.Join(o.cfg.Scopes, " "),
			"claims_present", strings.Join(claimNames(claims), ","))
	}
	return SignedIn{Principal: p, Expiry: id.expiry, IDToken: raw}, nil
}

// withUserInfo returns claims merged with the provider's UserInfo for accessToken: a claim of
// the ID token wins; the UserInfo's subject must be the ID token's.
func (o *OIDC) withUserInfo(ctx context.Context, d *discovery, accessToken string, claims map[string]any) (map[string]any, error) {
	body, err := o.get(ctx, d.UserInfoURL, accessToken)
	if err != nil {
		return nil, fmt.Errorf("%w: its UserInfo endpoint: %v", ErrProviderUnavailable, err)
	}
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil {
		// A signed or encrypted UserInfo (a JWT) is not supported: the ID token's claims stay.
		o.cfg.Logger.Warn("OIDC: the UserInfo answer is not a JSON object; only the ID token's claims are used", "error", err)
		return claims, nil
	}
	if info["sub"] != claims["sub"] {
		return nil, fmt.Errorf("%w: the UserInfo's subject is not the ID token's", ErrUnauthenticated)
	}
	merged := make(map[string]any, len(claims)+len(info))
	for k, v := range info {
		merged[k] = v
	}
	for k, v := range claims {
		merged[k] = v
	}
	return merged, nil
}

// exchangeError classifies a failed code exchange: a 4xx answer of the token endpoint is a
// refusal (ErrUnauthenticated) that names the provider's OAuth error code and description
// (invalid_client for a wrong client secret, invalid_grant for a used code); no answer or a
// 5xx is the provider being unavailable (ErrProviderUnavailable), so that the UI can say so and
// offer its token form. The error never holds the code or a token.
func exchangeError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
		what := "no OAuth error code"
		if re.ErrorCode != "" {
			what = "error " + sanitizeOAuth(re.ErrorCode, 64)
			if re.ErrorDescription != "" {
				what += ": " + sanitizeOAuth(re.ErrorDescription, 200)
			}
		}
		return fmt.Errorf("%w: the provider refused the code (HTTP %d, %s)", ErrUnauthenticated, re.Response.StatusCode, what)
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

// sanitizeOAuth bounds a provider's error text and drops control characters, for a log line.
func sanitizeOAuth(s string, n int) string {
	s = cleanName(s)
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// looksLikeJWT reports whether a bearer token has the shape of a JWS compact serialization.
func looksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && !strings.ContainsAny(s, " \t")
}
