package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
)

// Admins list the UI's sessions and revoke them; nobody else may.
func TestSessionsEndpoints(t *testing.T) {
	t.Parallel()
	var sessions *auth.Sessions
	e := newEnv(t, func(s *setup) {
		var err error
		if sessions, err = auth.NewSessions(auth.SessionsConfig{Store: s.Core.Store}); err != nil {
			t.Fatal(err)
		}
		s.API.Sessions = sessions
	})
	ctx := context.Background()
	_, started, err := sessions.Start(ctx, auth.NewSession{Principal: auth.Principal{Name: "oidc:https://idp.example#u-1 (alice)",
		Display: "alice", Method: auth.MethodOIDC, Role: auth.RoleOperator}, IDToken: "secret.id.token", UserAgent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.do("GET", "/api/v1/sessions", viewerToken, nil); r.status != 403 {
		t.Fatalf("viewer: %d", r.status)
	}
	r := e.do("GET", "/api/v1/sessions", adminToken, nil)
	var page struct {
		Data []map[string]any `json:"data"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &page) != nil || len(page.Data) != 1 || page.Data[0]["id"] != started.ID ||
		page.Data[0]["principal"] != "oidc:https://idp.example#u-1 (alice)" || page.Data[0]["role"] != "operator" ||
		strings.Contains(string(r.body), "secret.id.token") {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/sessions?limit=0", adminToken, nil); r.status != 400 {
		t.Errorf("limit=0: %d", r.status)
	}
	if r := e.do("DELETE", "/api/v1/sessions/"+started.ID, operatorToken, nil); r.status != 403 {
		t.Errorf("operator revokes: %d", r.status)
	}
	if r := e.do("DELETE", "/api/v1/sessions/"+started.ID, adminToken, nil); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	for _, id := range []string{started.ID, "not-an-id", "00000000-0000-4000-8000-000000000000"} {
		if r := e.do("DELETE", "/api/v1/sessions/"+id, adminToken, nil); r.status != 404 {
			t.Errorf("revoke %q: %d", id, r.status)
		} else {
			r.problem(t)
		}
	}
	if list, _ := sessions.List(ctx, 10); len(list) != 0 {
		t.Errorf("sessions after the revocation: %+v", list)
	}
	var by, of string
	if err := e.pool.QueryRow(ctx, `SELECT principal, details->>'of' FROM audit_log WHERE action = 'session_revoke'`).Scan(&by, &of); err != nil ||
		by != "token:ada" || of != "oidc:https://idp.example#u-1 (alice)" {
		t.Errorf("audit of the revocation: %q %q (%v)", by, of, err)
	}
}

// The API accepts the certified provider's access tokens for a configured audience, refuses
// its ID tokens (401), and answers 503 while the provider's keys cannot be fetched; the
// static tokens keep working.
func TestJWTBearerOnTheAPI(t *testing.T) {
	t.Parallel()
	p := testkit.NewOIDCProvider(t)
	p.SetAudience("api://redrive")
	var skew atomic.Int64
	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: p.Issuer(), ClientID: p.ClientID, Audience: "api://redrive",
		RoleMapping: map[string]auth.Grant{"redrive-operators": {Role: auth.RoleOperator}}, KeysMaxAge: time.Minute,
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) { s.Auth.OIDC = o })
	idToken, access := p.Tokens("alice", "alice-password", "profile")
	if r := e.do("GET", "/api/v1/stats", access, nil); r.status != 200 {
		t.Fatalf("access token: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/stats", idToken, nil); r.status != 401 || !strings.Contains(r.problem(t).Detail, "ID token") {
		t.Errorf("ID token: %d %s", r.status, r.body)
	}
	// 20 junk tokens with unknown key ids, sent by anyone: 401 each, no fetch of the keys
	// within the refetch interval.
	junk := testkit.OIDCProviderKey(t)
	before := p.JWKSFetches()
	for i := range 20 {
		tok := p.Token(map[string]any{"sub": "x", "aud": "api://redrive"}, testkit.TokenOptions{Key: junk, KeyID: fmt.Sprintf("junk-%d", i)})
		if r := e.do("GET", "/api/v1/stats", tok, nil); r.status != 401 {
			t.Fatalf("junk token: %d", r.status)
		}
	}
	if n := p.JWKSFetches(); n != before {
		t.Errorf("20 junk tokens made %d fetches of the keys, want 0", n-before)
	}
	// The provider rotates and withdraws the old key: once the cached keys expired, a token
	// of the withdrawn key is refused (401) and one of the new key accepted.
	oldKID := p.SigningKID()
	p.RotateKey()
	p.Withdraw(oldKID)
	stolen := p.Token(map[string]any{"sub": "mallory", "aud": "api://redrive", "groups": []string{"redrive-operators"}},
		testkit.TokenOptions{KeyID: oldKID, Type: "JWT"})
	if r := e.do("GET", "/api/v1/stats", stolen, nil); r.status != 200 {
		t.Errorf("old key within the cache's life: %d", r.status)
	}
	skew.Store(int64(61 * time.Second))
	if r := e.do("GET", "/api/v1/stats", stolen, nil); r.status != 401 || !strings.Contains(r.problem(t).Detail, "unknown signing key") {
		t.Errorf("withdrawn key after the cache's life: %d %s", r.status, r.body)
	}
	if _, fresh := p.Tokens("alice", "alice-password"); e.do("GET", "/api/v1/stats", fresh, nil).status != 200 {
		t.Errorf("access token of the new key refused")
	}
	p.SetDown(true)
	skew.Store(int64(3 * time.Minute))
	r := e.do("GET", "/api/v1/stats", access, nil)
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.problem(t).Detail, "identity provider is unreachable") {
		t.Errorf("access token with the provider down: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/stats", adminToken, nil); r.status != 200 {
		t.Errorf("static token with the provider down: %d", r.status)
	}
	_ = api.Prefix
}
