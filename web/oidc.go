package web

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/redrive/redrive/auth"
)

// OpenID Connect sign-in: GET /auth/login sends the browser to the provider (authorization
// code flow with PKCE), GET /auth/callback verifies its answer and starts a server-side
// session (auth.Sessions). Of the provider's tokens only the ID token is kept, with the
// session, to be sent as id_token_hint at sign-out.

// Defaults of the OIDC fields of Config.
const (
	DefaultOIDCName = "single sign-on"
	// signInMaxAge is how long a sign-in started at /auth/login may take to come back.
	signInMaxAge = 10 * time.Minute
)

// Cookie name and sealing purpose of OIDC sign-in.
const (
	// signInCookie holds the sign-in in progress (state, nonce, PKCE verifier, next), sealed;
	// only the callback path receives it.
	signInCookie = "redrive_oidc_signin"
	signInPath   = "/auth/"
)

func (c *Config) oidcDefaults(bad func(format string, args ...any)) {
	if c.OIDCName == "" {
		c.OIDCName = DefaultOIDCName
	}
	if visible(c.OIDCName) != c.OIDCName || len(c.OIDCName) > 100 {
		bad("OIDCName %q has invisible characters or more than 100 bytes", c.OIDCName)
	}
}

// signInState is the sealed content of signInCookie.
type signInState struct {
	State    string `json:"st"`
	Nonce    string `json:"no"`
	Verifier string `json:"ve"`
	Next     string `json:"nx"`
	Expires  int64  `json:"ex"`
}

// oidcCookie returns a cookie of OIDC sign-in: HttpOnly, Secure as configured, SameSite=Lax
// (the provider's redirect to the callback, and the callback's redirect to the page asked
// for, are cross-site navigations that a Strict cookie would miss).
func (h *handler) oidcCookie(r *http.Request, name, path, value string, maxAge int) *http.Cookie {
	c := h.cookie(r, name, value, maxAge)
	c.Path = path
	c.SameSite = http.SameSiteLaxMode
	return c
}

// endSessionURL returns the provider's address that ends its session (with the ID token as
// id_token_hint) and sends the browser back to OIDCPostLogoutURL (by default the sign-in page), or "" when the provider has none or cannot be reached (the sign-out
// here has happened anyway).
func (h *handler) endSessionURL(r *http.Request, idToken string) string {
	back := h.cfg.OIDCPostLogoutURL
	if origin := h.cfg.OIDC.Origin(); back == "" && origin != "" {
		back = origin + "/login"
	}
	end, err := h.cfg.OIDC.EndSessionURL(r.Context(), back, idToken)
	if err != nil {
		h.cfg.Logger.Warn("web: sign-out at the identity provider skipped", "error", err)
		return ""
	}
	return end
}

// getOIDCLogin starts a sign-in: it keeps a new auth.SignIn in a sealed cookie and sends the
// browser to the provider.
func (h *handler) getOIDCLogin(w http.ResponseWriter, r *http.Request) {
	if h.cfg.OIDC == nil {
		h.notFound(w, r)
		return
	}
	next := localPath(r.URL.Query().Get("next"))
	if sessionFrom(r.Context()).authed {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	in := auth.NewSignIn()
	target, err := h.cfg.OIDC.AuthCodeURL(r.Context(), in)
	if errors.Is(err, auth.ErrProviderUnavailable) {
		h.providerUnreachable(w, r, next, err)
		return
	}
	if err != nil {
		// A configuration without a redirect URL: the token form still works.
		h.cfg.Logger.Error("web: OIDC sign-in", "error", err)
		h.signInRefused(w, r, next, http.StatusInternalServerError,
			"Signing in with "+h.cfg.OIDCName+" is not set up completely on this server; the error has been logged. Sign in with an API token.")
		return
	}
	sealed, err := h.seal(signInCookie, signInState{State: in.State, Nonce: in.Nonce, Verifier: in.Verifier, Next: next,
		Expires: h.cfg.Now().Add(signInMaxAge).Unix()})
	if err != nil {
		h.serverError(w, r, "OIDC sign-in", err)
		return
	}
	http.SetCookie(w, h.oidcCookie(r, signInCookie, signInPath, sealed, int(signInMaxAge/time.Second)))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusFound)
}

// providerError is the shape of an OAuth 2.0 error code, shown to the user as it is.
var providerError = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// getOIDCCallback finishes a sign-in: the state must be the one of the sign-in cookie, the
// provider must exchange the code for a valid ID token (auth.OIDC.Exchange), and its user must
// have a role. It then starts a server-side session until the ID token expires or the
// sessions' MaxAge has passed.
func (h *handler) getOIDCCallback(w http.ResponseWriter, r *http.Request) {
	if h.cfg.OIDC == nil {
		h.notFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	// The sign-in cookie is good for one callback only.
	http.SetCookie(w, h.oidcCookie(r, signInCookie, signInPath, "", -1))
	var in signInState
	c, err := r.Cookie(signInCookie)
	if err != nil || !h.unseal(signInCookie, c.Value, &in) || !h.cfg.Now().Before(time.Unix(in.Expires, 0)) || in.State == "" {
		h.cfg.Logger.Info("web: OIDC callback without a sign-in in progress")
		h.signInRefused(w, r, "/", http.StatusUnauthorized,
			"This sign-in has expired or was not started in this browser. Start it again.")
		return
	}
	next := localPath(in.Next)
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(in.State)) != 1 {
		h.cfg.Logger.Warn("web: OIDC callback with a state that is not the sign-in's")
		h.signInRefused(w, r, next, http.StatusUnauthorized,
			"The answer of the identity provider does not belong to this sign-in (its state does not match). Start it again.")
		return
	}
	if e := q.Get("error"); e != "" {
		if !providerError.MatchString(e) {
			e = "unknown"
		}
		h.cfg.Logger.Info("web: the OIDC provider refused the sign-in", "error", e)
		h.signInRefused(w, r, next, http.StatusUnauthorized, "The identity provider refused the sign-in ("+e+").")
		return
	}
	code := q.Get("code")
	if code == "" {
		h.signInRefused(w, r, next, http.StatusUnauthorized, "The identity provider sent no authorization code. Start the sign-in again.")
		return
	}
	in2 := auth.SignIn{State: in.State, Nonce: in.Nonce, Verifier: in.Verifier}
	done, err := h.cfg.OIDC.Exchange(r.Context(), in2, code)
	switch {
	case errors.Is(err, auth.ErrProviderUnavailable):
		h.providerUnreachable(w, r, next, err)
		return
	case errors.Is(err, auth.ErrUnauthenticated):
		// The error names what failed (the provider's OAuth error, never a token).
		h.cfg.Logger.Warn("web: OIDC sign-in refused", "error", err)
		h.signInRefused(w, r, next, http.StatusUnauthorized,
			"The identity provider's answer could not be verified, so you are not signed in. Start the sign-in again; if this keeps happening, the server's log says why.")
		return
	case err != nil:
		h.cfg.Logger.Error("web: OIDC sign-in", "error", err)
		h.signInRefused(w, r, next, http.StatusBadGateway,
			"The identity provider's answer could not be used; the error has been logged. Try again later, or sign in with an API token.")
		return
	}
	p := done.Principal
	if p.Role == auth.RoleNone {
		h.cfg.Logger.Info("web: OIDC user without a role", "principal", p.Name)
		h.render(w, r, http.StatusForbidden, "error", http.StatusText(http.StatusForbidden), errorPage{
			Message: "You signed in as " + p.DisplayName() + ", but no redrive role is granted to you: you need at least the viewer role " +
				"(or operator or admin). Ask an administrator to add you to a group that redrive maps to a role.",
		})
		return
	}
	if !h.cfg.Now().Before(done.Expiry) {
		h.cfg.Logger.Warn("web: OIDC sign-in with an ID token that has expired", "principal", p.Name, "expiry", done.Expiry)
		h.signInRefused(w, r, next, http.StatusUnauthorized,
			"The identity provider issued an ID token that has already expired; the clocks of the provider and of this server may differ.")
		return
	}
	if old := sessionFrom(r.Context()).secret; old != "" {
		_, _ = h.cfg.Sessions.End(r.Context(), old) // a new sign-in replaces the one before
	}
	sess, err := h.startSession(w, r, auth.NewSession{Principal: p, Until: done.Expiry, IDToken: done.IDToken})
	if err != nil {
		h.serverError(w, r, "OIDC sign-in", err)
		return
	}
	h.cfg.Logger.Info("web: login", "principal", p.Name, "role", p.Role.String(), "method", auth.MethodOIDC, "session", sess.ID, "until", sess.Expires)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signInRefused shows the login page (both ways of signing in) with msg.
func (h *handler) signInRefused(w http.ResponseWriter, r *http.Request, next string, status int, msg string) {
	h.render(w, r, status, "login", "Sign in", h.loginForm(next, msg))
}

// providerUnreachable answers 503 with the login page: the provider cannot be reached, the
// token form still works.
func (h *handler) providerUnreachable(w http.ResponseWriter, r *http.Request, next string, err error) {
	h.cfg.Logger.Warn("web: the OIDC provider is unreachable", "error", err)
	h.signInRefused(w, r, next, http.StatusServiceUnavailable,
		"The identity provider is unreachable, so signing in with "+h.cfg.OIDCName+" is not possible right now. Try again later, or sign in with an API token.")
}
