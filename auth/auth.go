package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Role is what a principal may do. Roles are ordered: each allows everything the lower ones do.
type Role int

// The roles.
const (
	// RoleNone allows nothing: an authenticated user without a role.
	RoleNone Role = iota
	// RoleViewer reads failures, payloads, groups and stats.
	RoleViewer
	// RoleOperator also retries and closes failures and edits groups.
	RoleOperator
	// RoleAdmin may do everything.
	RoleAdmin
)

// String returns the role's name: none, viewer, operator or admin.
func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Allows reports whether a principal with role r may do what needs role need.
func (r Role) Allows(need Role) bool { return r >= need }

// Grant is what a token, a proxy group or an OIDC claim value grants: a role, and the payload
// permission.
type Grant struct {
	Role Role
	// Payload grants reading payload bytes and header values; RoleAdmin implies it.
	Payload bool
}

// ParseGrant reads a role with an optional "+payload": "viewer", "operator+payload", "admin"
// (which always has the payload permission).
func ParseGrant(s string) (Grant, error) {
	name, extra, hasExtra := strings.Cut(strings.TrimSpace(s), "+")
	role, err := ParseRole(name)
	if err != nil {
		return Grant{}, err
	}
	g := Grant{Role: role, Payload: role == RoleAdmin}
	if hasExtra {
		if !strings.EqualFold(strings.TrimSpace(extra), "payload") {
			return Grant{}, fmt.Errorf("unknown permission %q after the role (want \"+payload\")", extra)
		}
		g.Payload = true
	}
	return g, nil
}

// ParseRole returns the role named s (viewer, operator or admin, any case).
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "viewer":
		return RoleViewer, nil
	case "operator":
		return RoleOperator, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (want viewer, operator or admin)", s)
}

// Principal is who sent a request: the name written to the audit log, and the role.
type Principal struct {
	// Name identifies the principal in the audit log, and says where the identity came from
	// (see AuditName and OIDCName): "token:ada" for the token named ada, "proxy:ada" for the
	// user a trusted proxy names ada, "oidc:<issuer>#<subject> (<display name>)" for an OpenID
	// Connect user, "anonymous" without authentication. No two principals share a name.
	Name string
	// Display is the name shown to the user: the token's name, the proxy's user, the OIDC
	// user's preferred_username (or name, e-mail, subject).
	Display string
	// Role is what the principal may do.
	Role Role
	// Method is how the principal was authenticated: MethodToken, MethodProxy, MethodOIDC or
	// MethodNone.
	Method string
	// Subject is the OpenID subject of an OIDC principal; empty for others.
	Subject string
	// Payload is the permission to read payload bytes and header values.
	Payload bool
}

// CanReadPayload reports whether p may read payload bytes and header values: an admin, or a
// principal granted the payload permission.
func (p Principal) CanReadPayload() bool { return p.Payload || p.Role == RoleAdmin }

// How a principal was authenticated.
const (
	MethodToken = "token"
	MethodProxy = "proxy"
	// MethodNone is the anonymous admin of Config.InsecureNoAuth.
	MethodNone = "none"
)

type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal that Authenticator.Middleware stored in ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Default header names of the trusted-proxy mode, as oauth2-proxy sets them with
// --pass-user-headers (or --set-xauthrequest behind nginx auth_request, then named
// X-Auth-Request-User and X-Auth-Request-Groups).
const (
	DefaultProxyUserHeader   = "X-Forwarded-User"
	DefaultProxyGroupsHeader = "X-Forwarded-Groups"
)

// Config configures authentication. At least one of Tokens, TrustedProxies or
// InsecureNoAuth must be set.
type Config struct {
	// Tokens are the accepted bearer tokens (hashes only); see ParseTokens and LoadTokenFile.
	Tokens []Token
	// TrustedProxies are the addresses (single IPs or CIDR prefixes) of authenticating proxies
	// whose user and groups headers are believed. A request from any other address is judged
	// by its bearer token alone, whatever headers it carries. Empty disables the proxy mode.
	TrustedProxies []netip.Prefix
	// ProxyUserHeader names the header carrying the user. Defaults to X-Forwarded-User.
	ProxyUserHeader string
	// ProxyGroupsHeader names the header carrying the user's groups, separated by commas.
	// Defaults to X-Forwarded-Groups.
	ProxyGroupsHeader string
	// ProxyRoles maps a proxy group to a grant; a user gets the highest role of its groups,
	// and the payload permission when one of them grants it. See ParseProxyRoles.
	ProxyRoles map[string]Grant
	// ProxyDefaultRole is the role of a proxy user in no mapped group. Defaults to RoleNone
	// (authenticated, but refused everything).
	ProxyDefaultRole Role
	// OIDC, when set, accepts JWT bearer tokens of its issuer on the API and signs users in to
	// the UI (NewOIDC).
	OIDC *OIDC
	// InsecureNoAuth, when neither Tokens nor TrustedProxies are set, treats every request as
	// the admin principal "anonymous". For demos only; ignored when authentication is
	// configured.
	InsecureNoAuth bool
}

// Enabled reports whether any authentication is configured.
func (c *Config) Enabled() bool {
	return len(c.Tokens) > 0 || len(c.TrustedProxies) > 0 || c.OIDC != nil
}

// Validate returns an error when no authentication is configured and InsecureNoAuth is not
// set; the message names the flags that configure it. `redrive serve` calls it to refuse to
// start without authentication.
func (c *Config) Validate() error {
	if !c.Enabled() && !c.InsecureNoAuth {
		return errors.New("no API authentication configured: set --api-tokens (REDRIVE_API_TOKENS), " +
			"--api-token-file (REDRIVE_API_TOKEN_FILE), --api-trusted-proxies (REDRIVE_API_TRUSTED_PROXIES) " +
			"or --oidc-issuer-url (REDRIVE_OIDC_ISSUER_URL), " +
			"or pass --insecure-no-auth to run without authentication")
	}
	for i, t := range c.Tokens {
		if t.Name == "" || t.Role == RoleNone {
			return fmt.Errorf("invalid config: token %d has no name or no role", i+1)
		}
	}
	for group, g := range c.ProxyRoles {
		if group == "" || g.Role < RoleNone || g.Role > RoleAdmin {
			return fmt.Errorf("invalid config: proxy role mapping %q=%d", group, g.Role)
		}
	}
	return nil
}

// ErrUnauthenticated means a request carries no valid credentials.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator finds the principal of a request: a trusted proxy's user headers, else a
// bearer token. It is safe for concurrent use.
type Authenticator struct {
	cfg Config
}

// NewAuthenticator returns an Authenticator for cfg, after cfg.Validate.
func NewAuthenticator(cfg Config) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ProxyUserHeader == "" {
		cfg.ProxyUserHeader = DefaultProxyUserHeader
	}
	if cfg.ProxyGroupsHeader == "" {
		cfg.ProxyGroupsHeader = DefaultProxyGroupsHeader
	}
	cfg.Tokens = append([]Token(nil), cfg.Tokens...)
	return &Authenticator{cfg: cfg}, nil
}

// anonymous is the principal of every request with Config.InsecureNoAuth.
var anonymous = Principal{Name: "anonymous", Display: "anonymous", Role: RoleAdmin, Payload: true, Method: MethodNone}

// Authenticate returns the principal of r: a trusted proxy's user, else the bearer token of
// the Authorization header. The error wraps ErrUnauthenticated.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	if p, ok, err := a.Ambient(r); ok || err != nil {
		return p, err
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return Principal{}, fmt.Errorf("%w: the Authorization header is not \"Bearer <token>\"", ErrUnauthenticated)
	}
	token = strings.TrimSpace(token)
	if a.cfg.OIDC != nil && looksLikeJWT(token) {
		if _, ok := a.lookup(token); !ok {
			return a.cfg.OIDC.VerifyBearer(r.Context(), token)
		}
	}
	return a.Token(token)
}

// Token returns the principal of a bearer token's secret (as a user enters it at the UI's
// sign-in), or an error wrapping ErrUnauthenticated.
func (a *Authenticator) Token(secret string) (Principal, error) {
	secret = strings.TrimSpace(secret)
	if secret == "" {
		return Principal{}, fmt.Errorf("%w: empty token", ErrUnauthenticated)
	}
	if t, ok := a.lookup(secret); ok {
		p, _ := a.TokenNamed(t.Name)
		return p, nil
	}
	return Principal{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
}

// DisplayName returns the name to show the user: Display, else Name.
func (p Principal) DisplayName() string {
	if p.Display != "" {
		return p.Display
	}
	return p.Name
}

// TokenNamed returns the principal of the configured token named name, and whether there is
// one: a UI session started with a token follows the token's present role, and ends with it.
func (a *Authenticator) TokenNamed(name string) (Principal, bool) {
	for _, t := range a.cfg.Tokens {
		if t.Name == name {
			return Principal{Name: AuditName(MethodToken, t.Name), Display: t.Name, Role: t.Role,
				Payload: t.Payload || t.Role == RoleAdmin, Method: MethodToken}, true
		}
	}
	return Principal{}, false
}

// Ambient returns the principal that r carries without any credential of its own: the user a
// trusted proxy names, or the anonymous admin of InsecureNoAuth. ok is false when neither
// applies; an error (wrapping ErrUnauthenticated) means r comes from a trusted proxy whose
// user header holds no usable name.
func (a *Authenticator) Ambient(r *http.Request) (p Principal, ok bool, err error) {
	if a.cfg.InsecureNoAuth && !a.cfg.Enabled() {
		return anonymous, true, nil
	}
	return a.fromProxy(r)
}

// lookup finds the token whose hash matches secret. It compares with every configured token
// in constant time, so the time taken tells nothing about which token nearly matched.
func (a *Authenticator) lookup(secret string) (Token, bool) {
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range a.cfg.Tokens {
		if subtle.ConstantTimeCompare(sum[:], a.cfg.Tokens[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return a.cfg.Tokens[found], true
}

// fromProxy returns the principal a trusted proxy names, when r comes from one with a user
// header. A header whose name is empty once cleaned (only control characters, or bytes that
// are not UTF-8) is refused: every principal has a name for the audit log.
func (a *Authenticator) fromProxy(r *http.Request) (Principal, bool, error) {
	if len(a.cfg.TrustedProxies) == 0 || !a.trusted(r.RemoteAddr) {
		return Principal{}, false, nil
	}
	raw := r.Header.Values(a.cfg.ProxyUserHeader)
	if len(raw) == 0 {
		return Principal{}, false, nil
	}
	if len(raw) > 1 {
		return Principal{}, true, fmt.Errorf("%w: the proxy sent %s %d times", ErrUnauthenticated, a.cfg.ProxyUserHeader, len(raw))
	}
	user := strings.TrimSpace(cleanName(raw[0]))
	if user == "" {
		return Principal{}, true, fmt.Errorf("%w: the proxy's %s header names no user (empty once control characters and invalid UTF-8 are removed)", ErrUnauthenticated, a.cfg.ProxyUserHeader)
	}
	var groups []string
	for _, v := range r.Header.Values(a.cfg.ProxyGroupsHeader) {
		for _, g := range strings.Split(v, ",") {
			groups = append(groups, strings.TrimSpace(g))
		}
	}
	g := grantOf(groups, a.cfg.ProxyRoles, Grant{Role: a.cfg.ProxyDefaultRole})
	return Principal{Name: AuditName(MethodProxy, user), Display: user, Role: g.Role, Payload: g.Payload, Method: MethodProxy}, true, nil
}

func (a *Authenticator) trusted(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range a.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// cleanName bounds a proxy-given user name and drops control and formatting characters
// (bidirectional overrides, zero-width characters) and invalid UTF-8, for the audit log.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200])
	}
	return s
}

// grantOf returns what values grant through mapping: the highest role, and the payload
// permission when any grants it (or the role is admin); def when none maps.
func grantOf(values []string, mapping map[string]Grant, def Grant) Grant {
	g := def
	for _, v := range values {
		if m, ok := mapping[v]; ok {
			g.Role = max(g.Role, m.Role)
			g.Payload = g.Payload || m.Payload
		}
	}
	g.Payload = g.Payload || g.Role == RoleAdmin
	return g
}
