package api

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/redrive/redrive"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// Prefix is the path under which New routes the API.
const Prefix = "/api/v1"

// Defaults of Config.
const (
	DefaultMaxBodyBytes       = 1 << 20
	DefaultInlinePayloadBytes = 64 << 10
)

// Config configures the API handler.
type Config struct {
	// Core serves every operation. Required.
	Core *operator.Core
	// Auth authenticates requests. Required.
	Auth *auth.Authenticator
	// Logger receives errors and warnings. Defaults to a logger that discards.
	Logger *slog.Logger
	// Registerer receives the API's metrics. Defaults to none (metrics are kept but not
	// exported).
	Registerer prometheus.Registerer
	// MaxBodyBytes bounds a request body; a larger one gets 413. Defaults to 1 MiB.
	MaxBodyBytes int64
	// InlinePayloadBytes bounds the key and value bytes embedded in GET /failures/{id}; longer
	// ones are cut there (with "truncated": true) and whole from the payload route. Defaults
	// to 64 KiB.
	InlinePayloadBytes int
	// RepairRole is the role that may repair failures (edit and resend). Defaults to admin.
	RepairRole auth.Role
	// Sessions are the UI's server-side sessions that admins list (GET /sessions) and revoke
	// (DELETE /sessions/{id}). Defaults to none: the list is empty.
	Sessions *auth.Sessions
	// TracerProvider, when set, traces every request with a span named by its route pattern
	// (docs/operations.md, Tracing). Defaults to none: no spans.
	TracerProvider trace.TracerProvider
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// api holds the handlers' dependencies.
type api struct {
	cfg     Config
	core    *operator.Core
	auth    *auth.Authenticator
	log     *slog.Logger
	metrics *metrics
}

// New returns the API handler. It routes everything under Prefix (/api/v1) itself, so the
// service mounts it at "/api/v1/" (e.g. mux.Handle("/api/v1/", h)) without stripping the
// prefix; any other path gets a 404 problem.
func New(cfg Config) (http.Handler, error) {
	var errs []error
	if cfg.Core == nil {
		errs = append(errs, errors.New("invalid config: Core is required"))
	}
	if cfg.Auth == nil {
		errs = append(errs, errors.New("invalid config: Auth is required"))
	}
	if cfg.MaxBodyBytes < 0 || cfg.InlinePayloadBytes < 0 {
		errs = append(errs, errors.New("invalid config: MaxBodyBytes and InlinePayloadBytes must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.InlinePayloadBytes == 0 {
		cfg.InlinePayloadBytes = DefaultInlinePayloadBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RepairRole == auth.RoleNone {
		cfg.RepairRole = auth.RoleAdmin
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	a := &api{cfg: cfg, core: cfg.Core, auth: cfg.Auth, log: cfg.Logger, metrics: m}
	return a.routes(), nil
}

// routes builds the router. Every route is listed in openapi.json (a test checks both ways).
func (a *api) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(tracing(a.cfg.TracerProvider), a.recoverer, a.metrics.middleware)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "", "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusMethodNotAllowed, "", "the method is not allowed here")
	})
	r.Route(Prefix, func(r chi.Router) {
		r.Get("/openapi.json", a.openAPI)
		r.Group(func(r chi.Router) {
			r.Use(a.authenticate)
			r.Group(func(r chi.Router) {
				r.Use(requireRole(auth.RoleViewer))
				r.Get("/failures", a.listFailures)
				r.Get("/failures/export", a.exportFailures)
				r.Get("/failures/{id}", a.getFailure)
				r.Get("/failures/{id}/payload", a.getPayload)
				r.Get("/failures/{id}/revisions", a.listRevisions)
				r.Get("/stats", a.getStats)
				r.Get("/groups", a.listGroups)
				r.Get("/groups/{id}", a.getGroup)
				r.Get("/jobs", a.listJobs)
				r.Get("/jobs/{id}", a.getJob)
				r.Get("/jobs/{id}/items", a.listJobItems)
				r.Get("/jobs/{id}/audit", a.listJobAudit)
				r.Get("/dead-letters/reactivations", a.listReactivations)
				r.Get("/dead-letters/reactivations/{id}", a.getReactivation)
			})
			r.Group(func(r chi.Router) {
				r.Use(requireRole(auth.RoleOperator))
				r.Post("/failures/{id}/retry", a.retryOne)
				r.Post("/failures/{id}/close", a.closeOne)
				r.Post("/failures/retry", a.retryBulk)
				r.Post("/failures/close", a.closeBulk)
				r.Patch("/groups/{id}", a.patchGroup)
				r.Post("/groups/{id}/ticket", a.openTicket)
				r.Post("/jobs", a.previewJob)
				r.Post("/jobs/{id}/start", a.startJob)
				r.Post("/jobs/{id}/pause", a.pauseJob)
				r.Post("/jobs/{id}/resume", a.resumeJob)
				r.Post("/jobs/{id}/cancel", a.cancelJob)
			})
			r.With(requireRole(a.cfg.RepairRole)).Post("/failures/{id}/repair", a.repairFailure)
			r.Group(func(r chi.Router) {
				r.Use(requireRole(auth.RoleAdmin))
				r.Get("/notifications", a.listNotifications)
				r.Post("/dead-letters/reactivations", a.reactivate)
				r.Post("/failures/import", a.importFailures)
				r.Get("/sessions", a.listSessions)
				r.Delete("/sessions/{id}", a.revokeSession)
			})
		})
	})
	return r
}

// recoverer turns a panic in a handler into a logged error with its stack and a 500 problem.
func (a *api) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("api: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeProblem(w, r, http.StatusInternalServerError, "", "internal error; the server log has the details")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authenticate stores the request's principal in its context, or answers 401; 503 when a
// token cannot be verified because the OpenID provider (its keys) is unreachable.
func (a *api) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.auth.Authenticate(r)
		if errors.Is(err, auth.ErrProviderUnavailable) {
			a.log.Warn("api: a JWT cannot be verified: the OpenID provider is unavailable", "error", err)
			w.Header().Set("Retry-After", "30")
			writeProblem(w, r, http.StatusServiceUnavailable, "", "the identity provider is unreachable, so the token cannot be verified; try again later or use a static API token")
			return
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="redrive"`)
			writeProblem(w, r, http.StatusUnauthorized, "", authDetail(err))
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// authDetail is the client-facing text of an authentication error.
func authDetail(err error) string {
	s := err.Error()
	if prefix := auth.ErrUnauthenticated.Error() + ": "; len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return "not authenticated"
}

// requireRole answers 403 unless the request's principal has a role that allows need.
func requireRole(need auth.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, ok := auth.PrincipalFrom(r.Context())
			switch {
			case !ok:
				w.Header().Set("WWW-Authenticate", `Bearer realm="redrive"`)
				writeProblem(w, r, http.StatusUnauthorized, "", "no principal")
			case !p.Role.Allows(need):
				writeProblem(w, r, http.StatusForbidden, "", fmt.Sprintf("%s has role %s; this needs %s", p.Name, p.Role, need))
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// principal returns the request's principal; the auth middleware guarantees one.
func principal(r *http.Request) auth.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

// reader returns the request's principal as a reader of payloads.
func reader(r *http.Request) operator.Reader {
	p := principal(r)
	return operator.Reader{Principal: p.Name, Payload: p.CanReadPayload()}
}

// pathID parses the {id} path parameter as a failure id.
func pathID(r *http.Request) (uuid.UUID, error) {
	s := chi.URLParam(r, "id")
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, badRequest("id", "%q is not a UUID", clip.Text(s, clip.Default))
	}
	return id, nil
}

// pathGroupID parses the {id} path parameter as a group id (or another positive integer id).
func pathGroupID(r *http.Request) (int64, error) {
	s := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("id", "%q is not a group id (a positive integer)", clip.Text(s, clip.Default))
	}
	return id, nil
}

// idOnly reads a request whose only input is the {id} path parameter, a failure or job id:
// it answers the problem and reports false when the id is bad or a query parameter is given.
func (a *api) idOnly(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := pathID(r)
	if err == nil {
		_, err = parseQuery(r)
	}
	if err != nil {
		a.fail(w, r, err)
		return uuid.Nil, false
	}
	return id, true
}

// intIDOnly is idOnly for a positive integer id (a group or a reactivation run).
func (a *api) intIDOnly(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := pathGroupID(r)
	if err == nil {
		_, err = parseQuery(r)
	}
	if err != nil {
		a.fail(w, r, err)
		return 0, false
	}
	return id, true
}

// parseQuery parses the query string of r strictly (a malformed pair, e.g. one with a
// semicolon, is an error rather than dropped) and answers 400 for a parameter not in allowed,
// and for one given more than once unless operator.Repeatable says it may.
func parseQuery(r *http.Request, allowed ...[]string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("query", "malformed query string: %s", err.Error())
	}
	known := map[string]bool{}
	for _, list := range allowed {
		for _, name := range list {
			known[name] = true
		}
	}
	for name, vs := range q {
		if !known[name] {
			if name == "" {
				return nil, badRequest("query", "a parameter without a name")
			}
			return nil, badRequest(clip.Text(name, clip.Default), "unknown query parameter")
		}
		if len(vs) > 1 && !operator.Repeatable(name) {
			return nil, badRequest(name, "given %d times, at most once", len(vs))
		}
	}
	return q, nil
}

// parseLimit reads the limit parameter: default operator.DefaultPageSize, at most
// redrive.MaxListLimit.
func parseLimit(q url.Values) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return operator.DefaultPageSize, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > redrive.MaxListLimit {
		return 0, badRequest("limit", "%q is not an integer from 1 to %d", clip.Text(s, clip.Default), redrive.MaxListLimit)
	}
	return n, nil
}

// pageParams reads the query of a list that takes nothing but limit and cursor.
func pageParams(r *http.Request) (limit int, cursor string, err error) {
	q, err := parseQuery(r, []string{"limit", "cursor"})
	if err != nil {
		return 0, "", err
	}
	if limit, err = parseLimit(q); err != nil {
		return 0, "", err
	}
	return limit, q.Get("cursor"), nil
}

// parseSort reads the sort parameter: newest (default) or oldest.
func parseSort(q url.Values) (redrive.Order, error) {
	switch s := q.Get("sort"); s {
	case "", "newest":
		return redrive.NewestFirst, nil
	case "oldest":
		return redrive.OldestFirst, nil
	default:
		return 0, badRequest("sort", "%q is not newest or oldest", clip.Text(s, clip.Default))
	}
}
