package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/store"
)

// Prefix is the path under which New routes the API.
const Prefix = "/api/v1"

// Defaults of Config.
const (
	DefaultMaxBodyBytes       = 1 << 20
	DefaultQueryTimeout       = 10 * time.Second
	DefaultMaxBulk            = 10000
	DefaultStatsMaxAge        = 10 * time.Second
	DefaultInlinePayloadBytes = 64 << 10
	DefaultActionTimeout      = 10 * time.Minute
)

// Limits of requests.
const (
	// MaxIDs bounds the ids of one bulk request.
	MaxIDs = 1000
	// MaxReasonLen bounds a reason in characters.
	MaxReasonLen = 1000
	// defaultPageSize is the page size when limit is not given.
	defaultPageSize = 50
	// maxChain bounds the attempt chain of a detail; maxAudit its audit entries.
	maxChain = 200
	maxAudit = 500
)

// Config configures the API handler.
type Config struct {
	// Store is the failure store. Required.
	Store *store.Store
	// Resender republishes failures for the retry routes. When nil, they answer 503.
	Resender Resender
	// Auth configures authentication and roles. It must enable some authentication, or set
	// InsecureNoAuth (see Validate).
	Auth AuthConfig
	// Registry, when set, lets GET /failures/{id}/payload?format=avro decode payloads framed
	// in the Confluent wire format with their writer schema. Optional.
	Registry schemaregistry.Client
	// Logger receives errors and warnings. Defaults to a logger that discards.
	Logger *slog.Logger
	// Registerer receives the API's metrics. Defaults to none (metrics are kept but not
	// exported).
	Registerer prometheus.Registerer
	// MaxBodyBytes bounds a request body; a larger one gets 413. Defaults to 1 MiB.
	MaxBodyBytes int64
	// QueryTimeout bounds each read query; a query that takes longer gets 503. Defaults to 10s.
	QueryTimeout time.Duration
	// ActionTimeout bounds a retry or close request, which runs to its end even when the
	// client disconnects. Defaults to 10m.
	ActionTimeout time.Duration
	// MaxBulk bounds how many failures one bulk action by filter may affect; a filter matching
	// more gets 422 (a dry run still counts them). Defaults to 10000.
	MaxBulk int
	// StatsMaxAge is how old the counts of GET /stats may be; older ones are refreshed in the
	// background while the previous counts are served. Defaults to 10s.
	StatsMaxAge time.Duration
	// InlinePayloadBytes bounds the key and value bytes embedded in GET /failures/{id}; longer
	// ones are cut there (with "truncated": true) and whole from the payload route. Defaults
	// to 64 KiB.
	InlinePayloadBytes int
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Validate checks cfg without building anything: in particular that some authentication is
// configured or --insecure-no-auth given (the error names the flags). `redrive serve` calls it
// before starting.
func (c *Config) Validate() error {
	if c.Store == nil {
		return errors.New("invalid config: Store is required")
	}
	if err := c.Auth.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("invalid config: MaxBodyBytes %d is negative", c.MaxBodyBytes)
	case c.QueryTimeout < 0:
		return fmt.Errorf("invalid config: QueryTimeout %s is negative", c.QueryTimeout)
	case c.ActionTimeout < 0:
		return fmt.Errorf("invalid config: ActionTimeout %s is negative", c.ActionTimeout)
	case c.MaxBulk < 0:
		return fmt.Errorf("invalid config: MaxBulk %d is negative", c.MaxBulk)
	case c.StatsMaxAge < 0:
		return fmt.Errorf("invalid config: StatsMaxAge %s is negative", c.StatsMaxAge)
	case c.InlinePayloadBytes < 0:
		return fmt.Errorf("invalid config: InlinePayloadBytes %d is negative", c.InlinePayloadBytes)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.ActionTimeout == 0 {
		c.ActionTimeout = DefaultActionTimeout
	}
	if c.MaxBulk == 0 {
		c.MaxBulk = DefaultMaxBulk
	}
	if c.StatsMaxAge == 0 {
		c.StatsMaxAge = DefaultStatsMaxAge
	}
	if c.InlinePayloadBytes == 0 {
		c.InlinePayloadBytes = DefaultInlinePayloadBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// api holds the handlers' dependencies.
type api struct {
	cfg     Config
	store   *store.Store
	log     *slog.Logger
	auth    *Authenticator
	metrics *metrics
	stats   *statsCache
	avro    *avroDecoder
}

// New returns the API handler. It routes everything under Prefix (/api/v1) itself, so the
// service mounts it at "/api/v1/" (e.g. mux.Handle("/api/v1/", h)) without stripping the
// prefix; any other path gets a 404 problem.
func New(cfg Config) (http.Handler, error) {
	a, err := newAPI(cfg)
	if err != nil {
		return nil, err
	}
	return a.routes(), nil
}

func newAPI(cfg Config) (*api, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	auth, err := NewAuthenticator(cfg.Auth)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	a := &api{cfg: cfg, store: cfg.Store, log: cfg.Logger, auth: auth, metrics: m}
	a.stats = newStatsCache(cfg.Store.FailureStats, cfg.StatsMaxAge, cfg.QueryTimeout, cfg.Now, cfg.Logger)
	if cfg.Registry != nil {
		a.avro = newAvroDecoder(cfg.Registry)
	}
	if cfg.Auth.InsecureNoAuth && !cfg.Auth.Enabled() {
		cfg.Logger.Warn("api: authentication is disabled (--insecure-no-auth): every request acts as admin")
	}
	return a, nil
}

// routes builds the router. Every route is listed in openapi.json (a test checks both ways).
func (a *api) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(a.recoverer, a.metrics.middleware)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "", "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusMethodNotAllowed, "", r.Method+" is not allowed here")
	})
	r.Route(Prefix, func(r chi.Router) {
		r.Get("/openapi.json", a.openAPI)
		r.Group(func(r chi.Router) {
			r.Use(a.auth.Middleware)
			r.Group(func(r chi.Router) {
				r.Use(RequireRole(RoleViewer))
				r.Get("/failures", a.listFailures)
				r.Get("/failures/{id}", a.getFailure)
				r.Get("/failures/{id}/payload", a.getPayload)
				r.Get("/stats", a.getStats)
				r.Get("/groups", a.listGroups)
				r.Get("/groups/{id}", a.getGroup)
			})
			r.Group(func(r chi.Router) {
				r.Use(RequireRole(RoleOperator))
				r.Post("/failures/{id}/retry", a.retryOne)
				r.Post("/failures/{id}/close", a.closeOne)
				r.Post("/failures/retry", a.retryBulk)
				r.Post("/failures/close", a.closeBulk)
				r.Patch("/groups/{id}", a.patchGroup)
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

// principal returns the request's principal; the auth middleware guarantees one.
func principal(r *http.Request) Principal {
	p, _ := PrincipalFrom(r.Context())
	return p
}

// pathID parses the {id} path parameter as a failure id.
func pathID(r *http.Request) (uuid.UUID, error) {
	s := chi.URLParam(r, "id")
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, badRequest("id", "%q is not a UUID", truncate(s, 40))
	}
	return id, nil
}

// pathGroupID parses the {id} path parameter as a group id.
func pathGroupID(r *http.Request) (int64, error) {
	s := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("id", "%q is not a group id (a positive integer)", truncate(s, 40))
	}
	return id, nil
}

// queryContext bounds a read query by the configured timeout.
func (a *api) queryContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), a.cfg.QueryTimeout)
}

// actionContext returns the context of a mutation: it survives the client's disconnect, so
// that an action runs to its end and its outcome is recorded, bounded by ActionTimeout.
func (a *api) actionContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), a.cfg.ActionTimeout)
}
