package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/redrive/redrive/api"
)

// APIAuthenticator returns an Authenticator that accepts exactly what the API's authenticator
// a accepts: its bearer tokens (checked by a, against their hashes) and its trusted proxies'
// user headers. With a's InsecureNoAuth, every request is its anonymous admin, as in the API.
func APIAuthenticator(a *api.Authenticator) Authenticator { return apiAuth{a: a} }

type apiAuth struct{ a *api.Authenticator }

// Token asks a about a request that carries only the token: no remote address, so that no
// proxy header can count.
func (x apiAuth) Token(ctx context.Context, token string) (Principal, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return Principal{}, fmt.Errorf("token request: %w", err)
	}
	r.RemoteAddr = ""
	r.Header.Set("Authorization", "Bearer "+token)
	p, err := x.a.Authenticate(r)
	if errors.Is(err, api.ErrUnauthenticated) {
		return Principal{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	if err != nil {
		return Principal{}, err
	}
	return principal(p), nil
}

// Proxy asks a about the request without its Authorization header: a principal then comes
// from a trusted proxy (or from a's InsecureNoAuth), never from a token.
func (x apiAuth) Proxy(r *http.Request) (Principal, bool, error) {
	c := r.Clone(r.Context())
	c.Header.Del("Authorization")
	p, err := x.a.Authenticate(c)
	if err != nil || (p.Method != "proxy" && p.Method != "none") {
		return Principal{}, false, nil
	}
	return principal(p), true, nil
}

func principal(p api.Principal) Principal {
	return Principal{Name: p.Name, Role: p.Role}
}
