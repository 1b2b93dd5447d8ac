package web

import (
	"bytes"
	"testing"
	"time"

	"github.com/redrive/redrive/auth"
)

// Whatever a browser sends as the OIDC sign-in cookie, reading it never panics, and only a
// value this server sealed for that cookie is accepted (the seeds' own, whose nonces differ
// per fuzzing process): the fuzzer cannot forge a sign-in in progress.
func FuzzSealedCookie(f *testing.F) {
	o, err := auth.NewOIDC(auth.OIDCConfig{IssuerURL: "https://id.example", ClientID: "redrive"})
	if err != nil {
		f.Fatal(err)
	}
	h := &handler{cfg: Config{SessionKey: bytes.Repeat([]byte{3}, 32), OIDC: o, Now: time.Now}}
	valid, err := h.seal(signInCookie, signInState{State: "s", Nonce: "n", Verifier: "v", Next: "/", Expires: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		f.Fatal(err)
	}
	other, err := h.seal("another purpose", signInState{State: "x", Verifier: "y"})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{valid, other, valid[:len(valid)-1], valid + "A", "", "%%%", "e30", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var in signInState
		ok := h.unseal(signInCookie, v, &in)
		if v == valid && !ok {
			t.Fatal("the server's own sign-in cookie is refused")
		}
		if ok && (in.State != "s" || in.Verifier != "v") {
			t.Fatalf("sign-in cookie %q accepted as %+v", v, in)
		}
	})
}
