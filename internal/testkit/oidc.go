package testkit

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/example/server/storage"
)

// OIDCProvider is an OpenID Certified provider (zitadel/oidc's op package) running in-process
// for tests, on an in-memory storage (zitadel/oidc's example storage) extended with what the
// tests need: users whose claims sit in the ID token, only at UserInfo, only in the access
// token or only under a scope; JWT access tokens, optionally for an extra audience; signing
// keys that rotate and are withdrawn; a count of key-set fetches; the Cache-Control of the
// key set; and an outage (connections are dropped). Its sign-in page is a plain form
// (username, password) at /login.
type OIDCProvider struct {
	t        testing.TB
	srv      *httptest.Server
	provider *op.Provider
	st       *oidcStorage
	issuer   string
	// ClientID and Secret are redrive's confidential client.
	ClientID, Secret string

	down        atomic.Bool
	jwksFetches atomic.Int64

	mu           sync.Mutex
	users        map[string]*OIDCUser // by id
	keys         []*oidcKey           // the last signs; the published ones are in the key set
	redirects    []string
	audience     []string
	cacheControl string
	endSessions  []url.Values
	scopes       [][]string
}

// OIDCUser is a user of the provider and the claims it gets besides the standard ones
// (sub, preferred_username, name, email).
type OIDCUser struct {
	ID, Username, Password string
	// IDClaims go into the ID token, the UserInfo and the access token.
	IDClaims map[string]any
	// UserInfoClaims are only at the UserInfo endpoint (as providers that keep ID tokens
	// small do).
	UserInfoClaims map[string]any
	// AccessClaims are only in the JWT access token.
	AccessClaims map[string]any
	// ScopeClaims go into the ID token and the UserInfo only when the scope (the key) was
	// asked for, as Dex and Okta send groups only for the scope "groups".
	ScopeClaims map[string]map[string]any
}

type oidcKey struct {
	kid       string
	priv      *rsa.PrivateKey
	published bool
}

// NewOIDCProvider starts a provider with one signing key, the client "redrive" (secret
// "redrive-secret") and the user alice (password "alice-password", groups
// ["redrive-operators"] in the ID token); it stops when the test ends.
func NewOIDCProvider(t testing.TB) *OIDCProvider {
	t.Helper()
	p := &OIDCProvider{t: t, ClientID: "redrive", Secret: "redrive-secret", users: map[string]*OIDCUser{}}
	p.AddUser(OIDCUser{ID: "user-1", Username: "alice", Password: "alice-password",
		IDClaims: map[string]any{"groups": []string{"redrive-operators"}}})
	p.RotateKey()
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			// Unreachable: the connection is dropped without an answer.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	p.issuer = p.srv.URL
	clients := map[string]*storage.Client{p.ClientID: storage.WebClient(p.ClientID, p.Secret, "http://127.0.0.1/unused")}
	p.st = &oidcStorage{Storage: storage.NewStorageWithClients(oidcUsers{p}, clients), p: p}
	key := sha256.Sum256([]byte("redrive test provider"))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	prov, err := op.NewProvider(&op.Config{CryptoKey: key, CodeMethodS256: true, AuthMethodPost: true,
		DefaultLogoutRedirectURI: "/signed-out", SupportedUILocales: []language.Tag{language.English}},
		p.st, op.StaticIssuer(p.issuer), op.WithAllowInsecure(), op.WithLogger(quiet))
	if err != nil {
		t.Fatalf("OIDC provider: %v", err)
	}
	p.provider = prov
	interceptor := op.NewIssuerInterceptor(prov.IssuerFromRequest)
	mux.HandleFunc("GET /login", p.loginPage)
	mux.HandleFunc("POST /login", interceptor.HandlerFunc(p.login))
	mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "signed out") })
	h := prov.HttpHandler()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/keys":
			p.jwksFetches.Add(1)
			p.mu.Lock()
			if p.cacheControl != "" {
				w.Header().Set("Cache-Control", p.cacheControl)
			}
			p.mu.Unlock()
		case "/end_session":
			_ = r.ParseForm()
			p.mu.Lock()
			p.endSessions = append(p.endSessions, r.Form)
			p.mu.Unlock()
		case "/authorize":
			p.mu.Lock()
			p.scopes = append(p.scopes, strings.Fields(r.URL.Query().Get("scope")))
			p.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	return p
}

// Issuer returns the provider's issuer URL.
func (p *OIDCProvider) Issuer() string { return p.issuer }

// AddUser adds (or replaces) a user.
func (p *OIDCProvider) AddUser(u OIDCUser) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users[u.ID] = &u
}

// AllowRedirect registers uri as a redirect and a post-logout redirect URI of the client.
func (p *OIDCProvider) AllowRedirect(uri string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redirects = append(p.redirects, uri)
}

// SetAudience adds audiences besides the client id to the tokens issued from now on (as an
// authorization server of an API does: Okta's api://default).
func (p *OIDCProvider) SetAudience(aud ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.audience = aud
}

// SetKeysCacheControl sets the Cache-Control header of the key set's answers ("" for none).
func (p *OIDCProvider) SetKeysCacheControl(v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cacheControl = v
}

// RotateKey adds a new signing key, published at once; it signs from now on. It returns its
// key id.
func (p *OIDCProvider) RotateKey() string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	kid := fmt.Sprintf("key-%d", len(p.keys)+1)
	p.keys = append(p.keys, &oidcKey{kid: kid, priv: k, published: true})
	return kid
}

// Withdraw removes the key kid from the published key set (it still signs if it is the
// newest: a compromised key in the hands of someone else).
func (p *OIDCProvider) Withdraw(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.keys {
		if k.kid == kid {
			k.published = false
		}
	}
}

// SigningKID returns the key id of the key that signs now.
func (p *OIDCProvider) SigningKID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[len(p.keys)-1].kid
}

// SetDown makes the provider unreachable (every connection dropped), or reachable again.
func (p *OIDCProvider) SetDown(down bool) { p.down.Store(down) }

// JWKSFetches returns how often the key set was fetched.
func (p *OIDCProvider) JWKSFetches() int64 { return p.jwksFetches.Load() }

// EndSessions returns the parameters of every call of the end-session endpoint.
func (p *OIDCProvider) EndSessions() []url.Values {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]url.Values(nil), p.endSessions...)
}

// Scopes returns the scopes of every authorization request.
func (p *OIDCProvider) Scopes() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.scopes...)
}

// TokenOptions change a token that Token mints.
type TokenOptions struct {
	// Type is the "typ" header. Defaults to "at+jwt"; "-" leaves it out.
	Type string
	// KeyID is the key that signs. Defaults to the signing key; Key overrides both (a forger).
	KeyID string
	Key   *rsa.PrivateKey
	// Algorithm signs. Defaults to RS256.
	Algorithm jose.SignatureAlgorithm
}

// Token mints a JWT with claims (iss, aud, iat, exp are filled in when absent: the issuer,
// the client id, now and in an hour) signed with one of the provider's keys: for token cases
// that a real flow cannot produce (times, types, withdrawn keys, forgeries).
func (p *OIDCProvider) Token(claims map[string]any, o TokenOptions) string {
	p.t.Helper()
	p.mu.Lock()
	k := p.keys[len(p.keys)-1]
	for _, c := range p.keys {
		if o.KeyID != "" && c.kid == o.KeyID {
			k = c
		}
	}
	p.mu.Unlock()
	key, kid := k.priv, k.kid
	if o.Key != nil {
		key = o.Key
	}
	if o.KeyID != "" {
		kid = o.KeyID
	}
	c := map[string]any{"iss": p.issuer, "aud": p.ClientID, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for n, v := range claims {
		if v == nil {
			delete(c, n)
			continue
		}
		c[n] = v
	}
	opts := &jose.SignerOptions{}
	switch o.Type {
	case "":
		opts = opts.WithType("at+jwt")
	case "-":
	default:
		opts = opts.WithType(jose.ContentType(o.Type))
	}
	alg := o.Algorithm
	if alg == "" {
		alg = jose.RS256
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, opts)
	if err != nil {
		p.t.Fatal(err)
	}
	payload, _ := json.Marshal(c)
	jws, err := signer.Sign(payload)
	if err != nil {
		p.t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// UnsignedToken returns a JWT with "alg": "none".
func (p *OIDCProvider) UnsignedToken(claims map[string]any) string {
	c := map[string]any{"iss": p.issuer, "aud": p.ClientID, "exp": time.Now().Add(time.Hour).Unix()}
	for n, v := range claims {
		c[n] = v
	}
	b, _ := json.Marshal(c)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"at+jwt"}`)) + "." + enc.EncodeToString(b) + "."
}

// OIDCProviderKey returns a fresh RSA key that the provider does not know.
func OIDCProviderKey(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Tokens signs in user through the provider's authorization code flow (as a client of its
// own, redirect http://127.0.0.1:1/cb) with scopes and returns the ID token and the JWT
// access token it issues.
func (p *OIDCProvider) Tokens(username, password string, scopes ...string) (idToken, accessToken string) {
	p.t.Helper()
	const cb = "http://127.0.0.1:1/cb"
	p.AllowRedirect(cb)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), cb) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	q := url.Values{"client_id": {p.ClientID}, "redirect_uri": {cb}, "response_type": {"code"},
		"scope": {strings.Join(append([]string{"openid"}, scopes...), " ")}, "state": {"s"}, "nonce": {"n"}}
	resp, err := c.Get(p.issuer + "/authorize?" + q.Encode())
	if err != nil {
		p.t.Fatal(err)
	}
	resp = p.SubmitLogin(c, resp, username, password)
	loc, err := resp.Location()
	if err != nil {
		p.t.Fatalf("no redirect to the client after the login: %d", resp.StatusCode)
	}
	code := loc.Query().Get("code")
	tr, err := http.PostForm(p.issuer+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {cb}, "client_id": {p.ClientID}, "client_secret": {p.Secret}})
	if err != nil {
		p.t.Fatal(err)
	}
	defer tr.Body.Close()
	var tok struct {
		IDToken     string `json:"id_token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(tr.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		p.t.Fatalf("token endpoint: HTTP %d: %v", tr.StatusCode, err)
	}
	return tok.IDToken, tok.AccessToken
}

// SubmitLogin answers the provider's sign-in form that resp (an answer of c) shows with
// username and password, and returns the answer after the redirects c follows.
func (p *OIDCProvider) SubmitLogin(c *http.Client, resp *http.Response, username, password string) *http.Response {
	p.t.Helper()
	defer resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if resp.StatusCode != http.StatusOK || id == "" {
		b, _ := io.ReadAll(resp.Body)
		p.t.Fatalf("not the provider's sign-in page: %s HTTP %d: %.300s", resp.Request.URL, resp.StatusCode, b)
	}
	next, err := c.PostForm(p.issuer+"/login", url.Values{"username": {username}, "password": {password}, "id": {id}})
	if err != nil {
		p.t.Fatal(err)
	}
	return next
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html><html><head><title>Test provider sign-in</title></head><body>
<form method="post" action="/login"><input type="hidden" name="id" value="{{.ID}}">
<label>User <input id="username" name="username"></label> <label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">Sign in</button></form>{{if .Error}}<p id="error">{{.Error}}</p>{{end}}</body></html>`))

func (p *OIDCProvider) loginPage(w http.ResponseWriter, r *http.Request) {
	_ = loginTemplate.Execute(w, map[string]string{"ID": r.URL.Query().Get("authRequestID")})
}

func (p *OIDCProvider) login(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("id")
	if err := p.st.CheckUsernamePassword(r.PostFormValue("username"), r.PostFormValue("password"), id); err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		_ = loginTemplate.Execute(w, map[string]string{"ID": id, "Error": err.Error()})
		return
	}
	http.Redirect(w, r, op.AuthCallbackURL(p.provider)(r.Context(), id), http.StatusFound)
}

// claimsOf returns the extra claims of user id for scopes: the ID claims, the claims of the
// scopes asked for, and (for UserInfo, and the access token) the extra claims of those.
func (p *OIDCProvider) claimsOf(id string, scopes []string, extra func(*OIDCUser) map[string]any) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.users[id]
	if u == nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range u.IDClaims {
		out[k] = v
	}
	for _, s := range scopes {
		for k, v := range u.ScopeClaims[s] {
			out[k] = v
		}
	}
	if extra != nil {
		for k, v := range extra(u) {
			out[k] = v
		}
	}
	return out
}

// oidcUsers is the storage's view of the provider's users.
type oidcUsers struct{ p *OIDCProvider }

func (u oidcUsers) GetUserByID(id string) *storage.User {
	u.p.mu.Lock()
	defer u.p.mu.Unlock()
	if x := u.p.users[id]; x != nil {
		return &storage.User{ID: x.ID, Username: x.Username, Password: x.Password, FirstName: x.Username, LastName: "Test",
			Email: x.Username + "@example.com", EmailVerified: true, PreferredLanguage: language.English}
	}
	return nil
}

func (u oidcUsers) GetUserByUsername(name string) *storage.User {
	u.p.mu.Lock()
	var id string
	for _, x := range u.p.users {
		if x.Username == name {
			id = x.ID
		}
	}
	u.p.mu.Unlock()
	if id == "" {
		return nil
	}
	return u.GetUserByID(id)
}

func (u oidcUsers) ExampleClientID() string { return "service" }

// oidcStorage is zitadel/oidc's example storage with the provider's keys, client and claims.
type oidcStorage struct {
	*storage.Storage
	p *OIDCProvider
	// scopes of the access tokens, by token id, for the UserInfo's scope claims.
	tokenScopes sync.Map
}

func (s *oidcStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return &oidcClient{Client: c, p: s.p}, nil
}

func (s *oidcStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return signingKey{s.p.keys[len(s.p.keys)-1]}, nil
}

func (s *oidcStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *oidcStorage) KeySet(context.Context) ([]op.Key, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	var out []op.Key
	for _, k := range s.p.keys {
		if k.published {
			out = append(out, publicKey{k})
		}
	}
	return out, nil
}

func (s *oidcStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	s.p.mu.Lock()
	aud := s.p.audience
	s.p.mu.Unlock()
	if len(aud) == 0 {
		return r, nil
	}
	return &audienceRequest{AuthRequest: r.(*storage.AuthRequest), extra: aud}, nil
}

func unwrap(r op.TokenRequest) op.TokenRequest {
	if a, ok := r.(*audienceRequest); ok {
		return a.AuthRequest
	}
	return r
}

func (s *oidcStorage) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, unwrap(r))
	s.tokenScopes.Store(id, r.GetScopes())
	return id, exp, err
}

func (s *oidcStorage) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	id, refresh, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, unwrap(r), current)
	s.tokenScopes.Store(id, r.GetScopes())
	return id, refresh, exp, err
}

func (s *oidcStorage) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, r, scopes); err != nil {
		return err
	}
	for k, v := range s.p.claimsOf(r.GetSubject(), r.GetScopes(), nil) {
		ui.AppendClaims(k, v)
	}
	return nil
}

func (s *oidcStorage) SetUserinfoFromToken(ctx context.Context, ui *zoidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	var scopes []string
	if v, ok := s.tokenScopes.Load(tokenID); ok {
		scopes = v.([]string)
	}
	for k, v := range s.p.claimsOf(subject, scopes, func(u *OIDCUser) map[string]any { return u.UserInfoClaims }) {
		ui.AppendClaims(k, v)
	}
	return nil
}

func (s *oidcStorage) GetPrivateClaimsFromScopes(_ context.Context, userID, _ string, scopes []string) (map[string]any, error) {
	return s.p.claimsOf(userID, scopes, func(u *OIDCUser) map[string]any { return u.AccessClaims }), nil
}

// audienceRequest is an authorization request whose tokens name extra audiences.
type audienceRequest struct {
	*storage.AuthRequest
	extra []string
}

func (a *audienceRequest) GetAudience() []string {
	return append(a.AuthRequest.GetAudience(), a.extra...)
}

// oidcClient is the example's web client with the provider's redirect URIs, its sign-in
// page, JWT access tokens, any scope, and the standard claims in the ID token.
type oidcClient struct {
	op.Client
	p *OIDCProvider
}

func (c *oidcClient) RedirectURIs() []string {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return append([]string(nil), c.p.redirects...)
}

func (c *oidcClient) PostLogoutRedirectURIs() []string    { return c.RedirectURIs() }
func (c *oidcClient) LoginURL(id string) string           { return "/login?authRequestID=" + url.QueryEscape(id) }
func (c *oidcClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *oidcClient) IsScopeAllowed(string) bool          { return true }
func (c *oidcClient) IDTokenUserinfoClaimsAssertion() bool {
	return true
}
func (c *oidcClient) ClockSkew() time.Duration { return 0 }

type signingKey struct{ k *oidcKey }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.k.priv }
func (k signingKey) ID() string                                  { return k.k.kid }

type publicKey struct{ k *oidcKey }

func (k publicKey) ID() string                         { return k.k.kid }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.k.priv.PublicKey }
