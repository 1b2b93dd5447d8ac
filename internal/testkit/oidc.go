package testkit

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OIDCProvider is an OpenID Connect provider running in-process for tests: discovery, a JWKS
// with key rotation, an authorization endpoint that signs in the configured user at once, and
// a token endpoint that checks the client, the code and its PKCE verifier. It signs tokens with
// RS256 (go-jose). Stop makes it unreachable; Start serves again on the same address.
type OIDCProvider struct {
	t        testing.TB
	srv      *httptest.Server
	ClientID string
	Secret   string

	mu     sync.Mutex
	keys   []*rsa.PrivateKey // the newest signs; all are published
	kids   []string
	user   map[string]any
	codes  map[string]oidcCode
	down   bool
	issuer string
	// noEndSession leaves end_session_endpoint out of the discovery document.
	noEndSession bool
}

type oidcCode struct {
	clientID, redirect, challenge, nonce string
	expires                              time.Time
}

// NewOIDCProvider starts a provider with one signing key and a client ("redrive", secret
// "redrive-secret"); it stops when the test ends.
func NewOIDCProvider(t testing.TB) *OIDCProvider {
	t.Helper()
	p := &OIDCProvider{t: t, ClientID: "redrive", Secret: "redrive-secret", codes: map[string]oidcCode{},
		user: map[string]any{"sub": "user-1", "preferred_username": "alice", "groups": []string{"redrive-operators"}}}
	p.RotateKey()
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.issuer = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// WithoutEndSession makes the provider announce no end_session_endpoint (call it before the
// client discovers the provider).
func (p *OIDCProvider) WithoutEndSession() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noEndSession = true
}

// Issuer returns the issuer URL.
func (p *OIDCProvider) Issuer() string { return p.issuer }

// SetUser sets the claims of the user the authorization endpoint signs in (sub, groups, …).
func (p *OIDCProvider) SetUser(claims map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = claims
}

// RotateKey adds a new signing key; the JWKS publishes the new and the old ones.
func (p *OIDCProvider) RotateKey() {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, key)
	p.kids = append(p.kids, fmt.Sprintf("key-%d", len(p.keys)))
}

// DropOldKeys publishes only the newest key from now on.
func (p *OIDCProvider) DropOldKeys() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys, p.kids = p.keys[len(p.keys)-1:], p.kids[len(p.kids)-1:]
}

// SetDown makes every endpoint answer 503 (down) or serve again.
func (p *OIDCProvider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// TokenOptions change what Token signs.
type TokenOptions struct {
	// Audience defaults to the client id; Issuer to the provider's.
	Audience, Issuer string
	// Expiry defaults to an hour from now; NotBefore to none.
	Expiry, NotBefore time.Time
	// Key signs instead of the provider's newest key (a forged token).
	Key *rsa.PrivateKey
}

// Token returns a JWT with claims (plus iss, aud, exp, iat) signed by the provider's newest key.
func (p *OIDCProvider) Token(claims map[string]any, o TokenOptions) string {
	p.t.Helper()
	p.mu.Lock()
	key, kid := p.keys[len(p.keys)-1], p.kids[len(p.kids)-1]
	p.mu.Unlock()
	if o.Key != nil {
		key = o.Key
	}
	if o.Audience == "" {
		o.Audience = p.ClientID
	}
	if o.Issuer == "" {
		o.Issuer = p.issuer
	}
	if o.Expiry.IsZero() {
		o.Expiry = time.Now().Add(time.Hour)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		p.t.Fatal(err)
	}
	std := jwt.Claims{Issuer: o.Issuer, Audience: jwt.Audience{o.Audience}, Expiry: jwt.NewNumericDate(o.Expiry), IssuedAt: jwt.NewNumericDate(time.Now())}
	if !o.NotBefore.IsZero() {
		std.NotBefore = jwt.NewNumericDate(o.NotBefore)
	}
	raw, err := jwt.Signed(signer).Claims(std).Claims(claims).Serialize()
	if err != nil {
		p.t.Fatal(err)
	}
	return raw
}

// UnsignedToken returns a JWT with "alg": "none" and the claims of a valid token.
func (p *OIDCProvider) UnsignedToken(claims map[string]any) string {
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	body := map[string]any{"iss": p.issuer, "aud": p.ClientID, "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	return head + "." + base64.RawURLEncoding.EncodeToString(b) + "."
}

func (p *OIDCProvider) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		http.Error(w, "provider down", http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		doc := map[string]any{
			"issuer": p.issuer, "authorization_endpoint": p.issuer + "/authorize", "token_endpoint": p.issuer + "/token",
			"jwks_uri": p.issuer + "/jwks", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
			"code_challenge_methods_supported": []string{"S256"},
		}
		p.mu.Lock()
		if !p.noEndSession {
			doc["end_session_endpoint"] = p.issuer + "/logout"
		}
		p.mu.Unlock()
		writeJSONBody(w, doc)
	case "/logout":
		// RP-initiated logout: the provider's session ends; back to the client's page.
		if r.URL.Query().Get("client_id") != p.ClientID {
			http.Error(w, "unknown client_id", http.StatusBadRequest)
			return
		}
		if back := r.URL.Query().Get("post_logout_redirect_uri"); back != "" {
			http.Redirect(w, r, back, http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("signed out"))
	case "/jwks":
		p.mu.Lock()
		set := jose.JSONWebKeySet{}
		for i, k := range p.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: p.kids[i], Algorithm: "RS256", Use: "sig"})
		}
		p.mu.Unlock()
		writeJSONBody(w, set)
	case "/authorize":
		p.authorize(w, r)
	case "/token":
		p.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

// authorize signs the configured user in at once and redirects back with a code.
func (p *OIDCProvider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := make([]byte, 16)
	_, _ = rand.Read(code)
	c := base64.RawURLEncoding.EncodeToString(code)
	p.mu.Lock()
	p.codes[c] = oidcCode{clientID: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		nonce: q.Get("nonce"), expires: time.Now().Add(time.Minute)}
	p.mu.Unlock()
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	bq := back.Query()
	bq.Set("code", c)
	bq.Set("state", q.Get("state"))
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token exchanges a code for an ID token, checking the client and the PKCE verifier.
func (p *OIDCProvider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	p.mu.Lock()
	c, found := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	user := p.user
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case id != p.ClientID || secret != p.Secret:
		w.WriteHeader(http.StatusUnauthorized)
		writeJSONBody(w, map[string]string{"error": "invalid_client"})
		return
	case !found || time.Now().After(c.expires) || c.redirect != r.PostForm.Get("redirect_uri"),
		base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
		w.WriteHeader(http.StatusBadRequest)
		writeJSONBody(w, map[string]string{"error": "invalid_grant"})
		return
	}
	claims := map[string]any{"nonce": c.nonce}
	for k, v := range user {
		claims[k] = v
	}
	idToken := p.Token(claims, TokenOptions{})
	writeJSONBody(w, map[string]any{"access_token": p.Token(user, TokenOptions{}), "token_type": "Bearer",
		"expires_in": 3600, "id_token": idToken})
}

func writeJSONBody(w http.ResponseWriter, v any) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	_ = json.NewEncoder(w).Encode(v)
}

// OIDCProviderKey returns a fresh RSA key that the provider does not know, for forged tokens.
func OIDCProviderKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
