package web

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/operator"
)

// The embedded templates and static files.
var (
	//go:embed templates/*.html
	templateFS embed.FS
	//go:embed static
	staticFS embed.FS
)

// Config configures the UI handler. A zero field means the documented default.
type Config struct {
	// Core serves every query and action of the pages: the one operator core that the REST
	// API uses too, so that both follow the same rules (filters, bulk cap, reasons, audit).
	// Required.
	Core *operator.Core
	// Auth finds the principal of a request: a trusted proxy's user (or the anonymous admin
	// of an unauthenticated demo), else the API token entered at sign-in. The API shares it.
	// Required.
	Auth *auth.Authenticator
	// SessionKey is the HMAC key of the CSRF tokens, at least 32 bytes. Every instance behind
	// one load balancer needs the same key. Defaults to a random key: a form rendered by one
	// instance is then refused by another, and by this one after a restart.
	SessionKey []byte
	// SecureCookies marks the cookies Secure. Defaults to false, in which case a cookie is
	// Secure only when the request came over TLS to this process; set it behind a TLS proxy.
	SecureCookies bool
	// PageSize is the number of rows of a failure or group page. Defaults to 50, at most 500.
	PageSize int
	// ChartWindow is the time span of the overview chart. Defaults to 24h.
	ChartWindow time.Duration
	// ChartBuckets is the number of bars of the overview chart. Defaults to 24.
	ChartBuckets int
	// MaxPayloadView bounds the bytes of a key, value or header shown in the hex and text
	// views; longer ones are cut (with a notice) and can be downloaded whole. Defaults to 64 KiB.
	MaxPayloadView int
	// RepairRole is the role that may repair failures (edit and resend). Defaults to admin.
	RepairRole auth.Role
	// Logger receives the handler's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time

	// OIDC sign-in (see oidc.go).

	// OIDC, when set, offers sign-in with its OpenID provider on the login page, beside the
	// token form (which stays: a static-token admin is never locked out). Defaults to none.
	OIDC *auth.OIDC
	// OIDCName names the provider on the login page: "Sign in with <OIDCName>". Defaults to
	// "single sign-on".
	OIDCName string
	// OIDCPostLogoutURL is where the provider sends the browser after its sign-out
	// (post_logout_redirect_uri; Microsoft Entra ID accepts only a registered one). Defaults
	// to the sign-in page at the origin of the OIDC redirect URL.
	OIDCPostLogoutURL string
	// Sessions keeps the signed-in sessions of the token form and of OIDC sign-in
	// server-side (in Postgres), so that a sign-out or an administrator's revocation ends a
	// session on every instance at once. Required for signing in; without it only a trusted
	// proxy's users (or the anonymous admin of a demo) get in.
	Sessions *auth.Sessions
}

// Defaults of Config.
const (
	DefaultPageSize       = 50
	DefaultChartWindow    = 24 * time.Hour
	DefaultChartBuckets   = 24
	DefaultMaxPayloadView = 64 << 10
)

func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid config: "+format, args...)) }
	if c.Core == nil {
		bad("Core is required")
	}
	if c.Auth == nil {
		bad("Auth is required")
	}
	switch {
	case c.SessionKey == nil:
		c.SessionKey = make([]byte, 32)
		_, _ = rand.Read(c.SessionKey)
	case len(c.SessionKey) < 32:
		bad("SessionKey has %d bytes, at least 32 are needed", len(c.SessionKey))
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.PageSize < 1 || c.PageSize > redrive.MaxListLimit {
		bad("PageSize %d is not between 1 and %d", c.PageSize, redrive.MaxListLimit)
	}
	if c.ChartWindow == 0 {
		c.ChartWindow = DefaultChartWindow
	}
	if c.ChartBuckets == 0 {
		c.ChartBuckets = DefaultChartBuckets
	}
	if c.ChartBuckets < 1 || c.ChartBuckets > 500 {
		bad("ChartBuckets %d is not between 1 and 500", c.ChartBuckets)
	}
	if c.ChartWindow < time.Duration(c.ChartBuckets)*time.Second {
		bad("ChartWindow %s is shorter than one second per bucket", c.ChartWindow)
	}
	if c.MaxPayloadView == 0 {
		c.MaxPayloadView = DefaultMaxPayloadView
	}
	if c.MaxPayloadView < 16 {
		bad("MaxPayloadView %d is below 16 bytes", c.MaxPayloadView)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	// OIDC sign-in.
	c.oidcDefaults(bad)
	return c, errors.Join(errs...)
}

// handler serves the UI.
type handler struct {
	cfg    Config
	core   *operator.Core
	pages  *pages
	static http.Handler
	mux    *http.ServeMux
	// session is mux behind the session middleware.
	session http.Handler
}

// New returns the UI's handler, meant to be mounted at the root of the site (the API lives at
// /api/v1, outside it).
func New(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("parse templates: %w", err)
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("static files: %w", err)
	}
	h := &handler{cfg: cfg, core: cfg.Core, pages: p, static: http.FileServerFS(sub), mux: http.NewServeMux()}
	h.routes()
	h.session = h.withSession(h.mux)
	return h, nil
}

func (h *handler) routes() {
	m := h.mux
	m.Handle("GET /static/", http.StripPrefix("/static", http.HandlerFunc(h.serveStatic)))
	m.HandleFunc("GET /login", h.getLogin)
	m.HandleFunc("POST /login", h.postLogin)
	m.HandleFunc("POST /logout", h.postLogout)
	// OIDC sign-in.
	m.HandleFunc("GET /auth/login", h.getOIDCLogin)
	m.HandleFunc("GET /auth/callback", h.getOIDCCallback)
	// Server-side sessions (sessions_page.go).
	m.HandleFunc("GET /sessions", h.requireRole(auth.RoleAdmin, h.getSessions))
	m.HandleFunc("POST /sessions/{id}/revoke", h.requireRole(auth.RoleAdmin, h.postRevokeSession))

	m.HandleFunc("GET /{$}", h.requireRole(auth.RoleViewer, h.getOverview))
	m.HandleFunc("GET /failures", h.requireRole(auth.RoleViewer, h.getFailures))
	m.HandleFunc("GET /failures/{id}", h.requireRole(auth.RoleViewer, h.getFailure))
	m.HandleFunc("GET /failures/{id}/{part}", h.requireRole(auth.RoleViewer, h.getPayload))
	// Jobs and the reactivation of the own dead-letter topic (jobs.go, deadletters.go).
	m.HandleFunc("POST /jobs/new", h.requireRole(auth.RoleOperator, h.postJobNew))
	m.HandleFunc("POST /jobs/preview", h.requireRole(auth.RoleOperator, h.postJobPreview))
	m.HandleFunc("POST /jobs/{id}/start", h.requireRole(auth.RoleOperator, h.postJobStart))
	m.HandleFunc("POST /jobs/{id}/pause", h.requireRole(auth.RoleOperator, h.postJobPause))
	m.HandleFunc("POST /jobs/{id}/resume", h.requireRole(auth.RoleOperator, h.postJobResume))
	m.HandleFunc("POST /jobs/{id}/cancel", h.requireRole(auth.RoleOperator, h.postJobCancel))
	m.HandleFunc("GET /jobs", h.requireRole(auth.RoleViewer, h.getJobs))
	m.HandleFunc("GET /jobs/{id}", h.requireRole(auth.RoleViewer, h.getJob))
	m.HandleFunc("GET /jobs/{id}/progress", h.requireRole(auth.RoleViewer, h.getJobProgress))
	m.HandleFunc("GET /dead-letters", h.requireRole(auth.RoleViewer, h.getDeadLetters))
	m.HandleFunc("POST /dead-letters", h.requireRole(auth.RoleAdmin, h.postReactivate))
	m.HandleFunc("GET /dead-letters/{id}", h.requireRole(auth.RoleViewer, h.getReactivation))
	m.HandleFunc("GET /dead-letters/{id}/progress", h.requireRole(auth.RoleViewer, h.getReactivationProgress))
	m.HandleFunc("POST /failures/confirm", h.requireRole(auth.RoleOperator, h.postConfirm))
	m.HandleFunc("POST /failures/retry", h.requireRole(auth.RoleOperator, h.postRetry))
	m.HandleFunc("POST /failures/close", h.requireRole(auth.RoleOperator, h.postClose))
	m.HandleFunc("GET /groups", h.requireRole(auth.RoleViewer, h.getGroups))
	m.HandleFunc("POST /groups/{id}", h.requireRole(auth.RoleOperator, h.postGroup))
	// Tickets from groups.
	m.HandleFunc("POST /groups/{id}/ticket", h.requireRole(auth.RoleOperator, h.postGroupTicket))
	// Triage at scale: the group page and the result page of an action (post/redirect/get).
	m.HandleFunc("GET /groups/{id}", h.requireRole(auth.RoleViewer, h.getGroup))
	m.HandleFunc("GET /failures/result", h.requireRole(auth.RoleViewer, h.getResult))
	// Export.
	m.HandleFunc("GET /failures/export", h.requireRole(auth.RoleViewer, h.getExport))
	// Import (an upload: a larger bound on the form).
	m.HandleFunc("GET /failures/import", h.requireRole(auth.RoleAdmin, h.getImport))
	m.HandleFunc("POST /failures/import", withFormLimit(auth.RoleAdmin, maxImportUpload, h.requireRole(auth.RoleAdmin, h.postImport)))
	// Repair and resend.
	m.HandleFunc("GET /failures/{id}/repair", h.requireRole(auth.RoleViewer, h.getRepair))
	m.HandleFunc("POST /failures/{id}/repair", h.requireRole(h.repairRole(), h.postRepair))
	m.HandleFunc("/", h.notFound)
}

// ServeHTTP sets the security headers and serves the request.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	if strings.HasPrefix(r.URL.Path, "/static/") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.mux.ServeHTTP(w, r) // no session needed for the embedded files
		return
	}
	h.session.ServeHTTP(w, r)
}

// contentSecurityPolicy allows nothing but this site's own scripts, styles and images: no
// inline script or style, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"

func (h *handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
		http.NotFound(w, r)
		return
	}
	// The file names carry no version: a short cache keeps a deployment's change visible.
	w.Header().Set("Cache-Control", "public, max-age=300")
	h.static.ServeHTTP(w, r)
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.renderError(w, r, http.StatusNotFound, "There is no page here.")
}
