package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/redrive/redrive/auth"
)

// Cookie names.
const (
	// sessionCookie holds a random session id; the CSRF token is an HMAC of it.
	sessionCookie = "redrive_session"
	// tokenCookie holds the API token entered at login.
	tokenCookie = "redrive_token"
	// csrfField is the hidden form field carrying the CSRF token.
	csrfField = "csrf"
)

// sessionKey is the context key of the request's session.
type sessionKey struct{}

// session is what the handlers know about the request's user.
type session struct {
	id        string
	csrf      string
	principal auth.Principal
	// authed is true when principal is set; ambient when it came with the request itself (a
	// trusted proxy's user, or the anonymous admin of an unauthenticated demo) rather than
	// from the token entered at sign-in, so that there is nothing to sign out of.
	authed  bool
	ambient bool
}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	if s == nil {
		return &session{}
	}
	return s
}

func newSessionID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// csrfToken returns the CSRF token of a session: an HMAC of its id under the server's key.
func (h *handler) csrfToken(sessionID string) string {
	m := hmac.New(sha256.New, h.cfg.SessionKey)
	m.Write([]byte("redrive csrf\x00"))
	m.Write([]byte(sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookie returns a cookie for this UI with the hardening flags set.
func (h *handler) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   h.cfg.SecureCookies || r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	}
}

// withSession makes sure the request has a session id (issuing one when it has none) and
// identifies its principal, by trusted proxy first, then by the OIDC session cookie, then by
// the token cookie.
func (h *handler) withSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &session{}
		if c, err := r.Cookie(sessionCookie); err == nil && validSessionID(c.Value) {
			s.id = c.Value
		} else {
			s.id = newSessionID()
			http.SetCookie(w, h.cookie(r, sessionCookie, s.id, 0))
		}
		s.csrf = h.csrfToken(s.id)

		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))

		p, ok, err := h.cfg.Auth.Ambient(r)
		if err == nil && ok && strings.TrimSpace(p.Name) == "" {
			err = errors.New("the principal has no name") // every audit entry names who acted
		}
		switch {
		case err != nil:
			// A trusted proxy vouches for a user it cannot name: no session, whatever else
			// the request carries.
			h.cfg.Logger.Warn("web: the trusted proxy's identity is refused", "error", err)
			h.renderRefusedIdentity(w, r)
			return
		case ok:
			s.principal, s.authed, s.ambient = p, true, true
		default:
			// OIDC sign-in: a sealed cookie holds the principal.
			if p, ok := h.oidcPrincipal(w, r); ok {
				s.principal, s.authed = p, true
				break
			}
			if token := tokenFromCookie(r); token != "" {
				p, err := h.cfg.Auth.Token(token)
				switch {
				case err == nil:
					s.principal, s.authed = p, true
				case errors.Is(err, auth.ErrUnauthenticated):
					http.SetCookie(w, h.cookie(r, tokenCookie, "", -1))
				default:
					h.serverError(w, r, "authenticate", err)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// tokenFromCookie returns the API token kept in the request's cookie (base64url, so that any
// token fits a cookie value), or "".
func tokenFromCookie(r *http.Request) string {
	c, err := r.Cookie(tokenCookie)
	if err != nil || c.Value == "" {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	return string(b)
}

// validSessionID reports whether v looks like an id from newSessionID.
func validSessionID(v string) bool {
	if len(v) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil
}

// checkCSRF refuses a POST whose form lacks the session's CSRF token, or that a browser says
// comes from another site.
func (h *handler) checkCSRF(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	s := sessionFrom(r.Context())
	got := r.PostFormValue(csrfField)
	return s.id != "" && got != "" && hmac.Equal([]byte(got), []byte(s.csrf))
}

// requireRole wraps a handler that needs an authenticated principal with at least role: a
// browsing request without one goes to the login page; a POST needs a valid CSRF token too.
func (h *handler) requireRole(role auth.Role, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := sessionFrom(r.Context())
		if !s.authed {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.renderError(w, r, http.StatusUnauthorized, "Please sign in again: your session has ended.")
			return
		}
		if r.Method == http.MethodPost {
			if !h.readPostedForm(w, r) {
				return
			}
			if !h.checkCSRF(r) {
				h.renderError(w, r, http.StatusForbidden, "The form has expired or did not come from this site. Reload the page and try again.")
				return
			}
		}
		if !s.principal.Role.Allows(role) {
			h.renderError(w, r, http.StatusForbidden, "Your role ("+s.principal.Role.String()+") does not allow this action.")
			return
		}
		next(w, r)
	}
}

// maxFormBytes bounds a posted form: a bulk action carries at most a page of ids.
const maxFormBytes = 1 << 20

// loginForm is the data of the login page.
type loginForm struct {
	Next  string
	Error string
	// Provider names the OpenID provider to offer sign-in with; "" without OIDC.
	Provider string
}

// loginForm returns the data of the login page.
func (h *handler) loginForm(next, errMsg string) loginForm {
	f := loginForm{Next: next, Error: errMsg}
	if h.cfg.OIDC != nil {
		f.Provider = h.cfg.OIDCName
	}
	return f
}

func (h *handler) getLogin(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if sessionFrom(r.Context()).authed {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, "login", "Sign in", h.loginForm(next, ""))
}

func (h *handler) postLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !h.checkCSRF(r) {
		h.renderError(w, r, http.StatusForbidden, "The form has expired or did not come from this site. Reload the page and try again.")
		return
	}
	next := localPath(r.PostFormValue("next"))
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		h.render(w, r, http.StatusBadRequest, "login", "Sign in", h.loginForm(next, "Enter an API token."))
		return
	}
	p, err := h.cfg.Auth.Token(token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		h.cfg.Logger.Info("web: login refused")
		h.render(w, r, http.StatusUnauthorized, "login", "Sign in", h.loginForm(next, "This token is not valid."))
		return
	}
	if err != nil {
		h.serverError(w, r, "login", err)
		return
	}
	// A new session id at login, so that a session id planted before cannot ride on it.
	http.SetCookie(w, h.cookie(r, sessionCookie, newSessionID(), 0))
	http.SetCookie(w, h.cookie(r, tokenCookie, base64.RawURLEncoding.EncodeToString([]byte(token)), 0))
	http.SetCookie(w, h.oidcCookie(r, oidcSessionCookie, "/", "", -1)) // a token sign-in replaces an OIDC one
	h.cfg.Logger.Info("web: login", "principal", p.Name, "role", p.Role.String())
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *handler) postLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || !h.checkCSRF(r) {
		h.renderError(w, r, http.StatusForbidden, "The form has expired or did not come from this site. Reload the page and try again.")
		return
	}
	_, signedInWithOIDC := h.oidcPrincipal(w, r)
	http.SetCookie(w, h.cookie(r, tokenCookie, "", -1))
	http.SetCookie(w, h.cookie(r, sessionCookie, "", -1))
	http.SetCookie(w, h.oidcCookie(r, oidcSessionCookie, "/", "", -1))
	if signedInWithOIDC {
		// Our session has ended; the provider's is ended too when it says how, else the next
		// sign-in would pass without asking for credentials. A redirect of this form's answer
		// to another site would break the policy's form-action 'self', so a page sends the
		// browser on (a refresh, and a link).
		if end := h.endSessionURL(r); end != "" {
			anon := r.WithContext(context.WithValue(r.Context(), sessionKey{}, &session{}))
			h.render(w, anon, http.StatusOK, "signedout", "Signed out", signedOutPage{EndSession: end, Provider: h.cfg.OIDCName})
			return
		}
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// signedOutPage is the data of the page that sends the browser to the provider's sign-out.
type signedOutPage struct {
	EndSession string
	Provider   string
}

// localPath returns p when it is a path on this site, else "/": a redirect target from a
// form or query must not lead elsewhere.
func localPath(p string) string {
	if p == "" || p[0] != '/' || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || strings.ContainsAny(p, "\r\n\t") {
		return "/"
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return p
}
