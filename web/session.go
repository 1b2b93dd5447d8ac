package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/redrive/redrive/auth"
)

// Cookie names.
const (
	// sessionCookie holds a random id of the browser, signed in or not; the CSRF token is an
	// HMAC of it.
	sessionCookie = "redrive_session"
	// authCookie holds the secret of a signed-in server-side session (auth.Sessions): the
	// session ends for every instance when its row goes, whatever cookie is replayed.
	authCookie = "redrive_auth"
	// legacyTokenCookie and legacyOIDCCookie held a sign-in in earlier versions; they are
	// cleared when seen and never believed.
	legacyTokenCookie = "redrive_token"
	legacyOIDCCookie  = "redrive_oidc_session"
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
	// from a sign-in, so that there is nothing to sign out of.
	authed  bool
	ambient bool
	// secret is the signed-in session's cookie secret, and signedIn its server-side record.
	secret   string
	signedIn auth.Session
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
// identifies its principal: a trusted proxy's user first, else the server-side session whose
// secret the auth cookie holds (a token or OIDC sign-in).
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
			for _, name := range []string{legacyTokenCookie, legacyOIDCCookie} {
				if _, err := r.Cookie(name); err == nil {
					http.SetCookie(w, h.oidcCookie(r, name, "/", "", -1))
				}
			}
			c, err := r.Cookie(authCookie)
			if err != nil || c.Value == "" || h.cfg.Sessions == nil {
				break
			}
			sess, err := h.cfg.Sessions.Lookup(r.Context(), c.Value)
			if err == nil {
				p, ok := h.current(sess.Principal)
				if !ok {
					// The token of a token sign-in is no longer configured: the session ends.
					_, _ = h.cfg.Sessions.End(r.Context(), c.Value)
					err = auth.ErrSessionNotFound
				}
				sess.Principal = p
			}
			switch {
			case err == nil:
				s.principal, s.authed, s.secret, s.signedIn = sess.Principal, true, c.Value, sess
			case errors.Is(err, auth.ErrSessionNotFound):
				// Signed out, revoked, expired or never issued: the cookie is cleared and the
				// request is anonymous.
				http.SetCookie(w, h.authSessionCookie(r, "", -1))
			default:
				h.serverError(w, r, "session", err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// current returns the principal of a stored session as it is now: a token session takes the
// token's present role, and ends (false) when the token is no longer configured.
func (h *handler) current(p auth.Principal) (auth.Principal, bool) {
	if p.Method != auth.MethodToken {
		return p, true
	}
	return h.cfg.Auth.TokenNamed(p.Display)
}

// authSessionCookie returns the cookie of a signed-in session: HttpOnly, Secure as configured,
// SameSite=Lax (the provider's redirect to the callback, and the callback's redirect to the
// page asked for, are cross-site navigations that a Strict cookie would miss; the forms carry a
// CSRF token).
func (h *handler) authSessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return h.oidcCookie(r, authCookie, "/", value, maxAge)
}

// startSession starts a server-side session for n and sets its cookie, with a new session id
// for the CSRF token (so that an id planted before cannot ride on the sign-in).
func (h *handler) startSession(w http.ResponseWriter, r *http.Request, n auth.NewSession) (auth.Session, error) {
	if h.cfg.Sessions == nil {
		return auth.Session{}, errors.New("signing in needs server-side sessions (web.Config.Sessions)")
	}
	n.UserAgent, n.RemoteAddr = r.UserAgent(), clientAddr(r)
	secret, sess, err := h.cfg.Sessions.Start(r.Context(), n)
	if err != nil {
		return auth.Session{}, err
	}
	http.SetCookie(w, h.cookie(r, sessionCookie, newSessionID(), 0))
	http.SetCookie(w, h.authSessionCookie(r, secret, int(sess.Expires.Sub(h.cfg.Now())/time.Second)+1))
	return sess, nil
}

// clientAddr returns the client's address without the port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
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
	if old := sessionFrom(r.Context()).secret; old != "" {
		_, _ = h.cfg.Sessions.End(r.Context(), old) // a new sign-in replaces the one before
	}
	sess, err := h.startSession(w, r, auth.NewSession{Principal: p})
	if err != nil {
		h.serverError(w, r, "login", err)
		return
	}
	h.cfg.Logger.Info("web: login", "principal", p.Name, "role", p.Role.String(), "method", p.Method, "session", sess.ID, "until", sess.Expires)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *handler) postLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || !h.checkCSRF(r) {
		h.renderError(w, r, http.StatusForbidden, "The form has expired or did not come from this site. Reload the page and try again.")
		return
	}
	var ended auth.Session
	if secret := sessionFrom(r.Context()).secret; secret != "" {
		var err error
		ended, err = h.cfg.Sessions.End(r.Context(), secret)
		if err != nil && !errors.Is(err, auth.ErrSessionNotFound) {
			h.serverError(w, r, "logout", err)
			return
		}
		if err == nil {
			h.cfg.Logger.Info("web: logout", "principal", ended.Principal.Name, "session", ended.ID)
		}
	}
	http.SetCookie(w, h.cookie(r, sessionCookie, "", -1))
	http.SetCookie(w, h.authSessionCookie(r, "", -1))
	if ended.Principal.Method == auth.MethodOIDC && h.cfg.OIDC != nil {
		// Our session has ended; the provider's is ended too when it says how, else the next
		// sign-in would pass without asking for credentials. A redirect of this form's answer
		// to another site would break the policy's form-action 'self', so a page sends the
		// browser on (a refresh, and a link).
		if end := h.endSessionURL(r, ended.IDToken); end != "" {
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
