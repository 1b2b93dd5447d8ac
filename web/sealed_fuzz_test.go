package web

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redrive/redrive/auth"
)

// Whatever a browser sends as the OIDC session or sign-in cookie, reading it never panics,
// and only a value this server sealed for that cookie is accepted (the seeds' own, whose
// nonces differ per fuzzing process): the fuzzer cannot forge a session.
func FuzzSealedCookie(f *testing.F) {
	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: "https://id.example", ClientID: "redrive"})
	if err != nil {
		f.Fatal(err)
	}
	h := &handler{cfg: Config{SessionKey: bytes.Repeat([]byte{3}, 32), OIDC: o, Now: time.Now}}
	valid, err := h.seal(oidcSessionCookie, oidcSession{Name: "alice (user-1)", Subject: "user-1", Role: "operator",
		Expires: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		f.Fatal(err)
	}
	signIn, err := h.seal(signInCookie, signInState{State: "s", Nonce: "n", Verifier: "v", Next: "/", Expires: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{valid, signIn, valid[:len(valid)-1], valid + "A", "", "%%%", "e30", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Cookie", oidcSessionCookie+"="+v) // as a browser sends it, invalid bytes and all
		p, ok := h.oidcPrincipal(httptest.NewRecorder(), r)
		if v == valid && !ok {
			t.Fatal("the server's own session cookie is refused")
		}
		if ok && (p.Name != "alice (user-1)" || p.Subject != "user-1" || p.Role != auth.RoleOperator || p.Payload) {
			t.Fatalf("session cookie %q accepted as %+v", v, p)
		}
		var in signInState
		if h.unseal(signInCookie, v, &in) && (in.State != "s" || in.Verifier != "v") {
			t.Fatalf("sign-in cookie %q accepted as %+v", v, in)
		}
	})
}
