package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/promreg"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// Defaults and bounds of Config.
const (
	DefaultQueryTimeout  = 10 * time.Second
	DefaultActionTimeout = 10 * time.Minute
	DefaultMaxBulk       = 1000
	DefaultStatsMaxAge   = 10 * time.Second
	DefaultPageSize      = 50
	DefaultMaxFieldScan  = 10000
)

// Limits of requests.
const (
	// MaxIDs bounds the ids of one action by ids.
	MaxIDs = 1000
	// MaxReasonLen bounds a reason in characters.
	MaxReasonLen = 1000
	// MaxChain bounds the attempt chain of a failure's view; MaxAudit its audit entries.
	MaxChain = 200
	MaxAudit = 500
)

// Config configures a Core. A zero field means the documented default.
type Config struct {
	// Store is the failure store. Required.
	Store *store.Store
	// Resender republishes failures for retries (*resend.Resender). When nil, a retry wraps
	// redrive.ErrUnavailable.
	Resender Resender
	// Payloads decodes payloads (Avro, Protobuf, JSON Schema, plain JSON) for their views and
	// re-encodes repairs of them. Defaults to a decoder that knows the contract's own Avro
	// schemas and has no registry. It decodes the payloads of every cluster that
	// ClusterPayloads has no decoder for.
	Payloads *payload.Decoder
	// ClusterPayloads are the decoders of the named Kafka clusters, each with the schema
	// registry of its cluster: a failure's payload is decoded (and a repair of it re-encoded)
	// with the decoder of the failure's cluster, so that a schema id means what it means in
	// that cluster's registry. A cluster without one here uses Payloads. Defaults to none.
	ClusterPayloads map[string]*payload.Decoder
	// Masking hides parts of payloads in every payload view (masking.Load). Defaults to none.
	Masking *masking.Rules
	// QueryTimeout bounds each read. Defaults to 10s.
	QueryTimeout time.Duration
	// ActionTimeout bounds a retry or close, which runs to its end even when the caller's
	// context ends (its outcome must be recorded). Defaults to 10m.
	ActionTimeout time.Duration
	// MaxBulk bounds the failures one immediate action by filter may act on; a filter that
	// selects more is refused (a dry run still counts them): larger selections are jobs
	// (PreviewJob), which have no bound. At the resender's default rate of 200 records/s, 1000
	// retries take 5 s, well inside an HTTP write timeout. Defaults to 1000.
	MaxBulk int
	// MaxFieldScan bounds the candidates one request decodes for a decoded field search
	// (redrive.Filter.PayloadField): a list stops there and returns a cursor that continues
	// the scan; an action, a job preview or an export whose bounds hold more candidates is
	// refused. Defaults to 10000.
	MaxFieldScan int
	// StatsMaxAge is how old the counts of Stats may be; older ones are refreshed in the
	// background while the previous ones are served. Defaults to 10s.
	StatsMaxAge time.Duration
	// Reactivate starts a reactivation of the own dead-letter topic (the intake's
	// Reactivator). When nil, Reactivate wraps redrive.ErrUnavailable.
	Reactivate func(context.Context, ReactivateRequest) (*redrive.Reactivation, error)
	// DeadLetterTopic is the service's own dead-letter topic, whose reactivations are listed.
	DeadLetterTopic string
	// Clusters are the names of the configured Kafka clusters, the first the default of a
	// reactivation. With more than one, the reactivations of every cluster's dead-letter topic
	// are listed, and a reactivation names its cluster. Empty means the one cluster
	// store.DefaultCluster.
	Clusters []string
	// CrossCluster reports whether a failure read from cluster from may be resent to cluster
	// to (resend.Resender.CrossClusterAllowed). Nil allows no resend to another cluster.
	CrossCluster func(from, to string) bool
	// OpenTicket opens an issue for a group in a tracker (ticket.Jira.Create) and returns its
	// key. When nil, OpenTicket wraps redrive.ErrUnavailable.
	OpenTicket func(context.Context, *redrive.Group) (string, error)
	// TicketURL turns a ticket into an address (ticket.Link). Optional.
	TicketURL func(ticket string) string
	// RepairTopics are the topics a repair may send to besides the failure's original topic.
	RepairTopics []string
	// PreviewTTL is how long a job preview's token starts the job. Defaults to 15m.
	PreviewTTL time.Duration
	// Logger receives errors and warnings. Defaults to a logger that discards.
	Logger *slog.Logger
	// Registerer receives the core's metrics. Defaults to none.
	Registerer prometheus.Registerer
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Resender republishes failures on an operator's request: by id, or one failure as a repair
// revised it. *resend.Resender implements it; the core takes it through this interface so that
// it builds without the Kafka producer (and without cgo).
type Resender interface {
	// ResendIDs resends the failures with ids and returns one outcome per distinct id; it
	// wraps redrive.ErrClosed when the resender is shut down.
	ResendIDs(ctx context.Context, ids []uuid.UUID, req resendtype.ManualRequest) (resendtype.ManualResult, error)
	// ResendRevision resends one failure as rev says instead of as stored.
	ResendRevision(ctx context.Context, id uuid.UUID, rev resendtype.Revision, req resendtype.ManualRequest) (resendtype.ItemResult, error)
	// MaxIDs is the most ids one ResendIDs call accepts.
	MaxIDs() int
	// FollowChains releases the ordering chains of failures whose action succeeded: the open
	// failures parked behind each head, one at a time in offset order, after it
	// (resendtype.ChainRequest). It wraps resendtype.ErrClosed when the resender is shut down.
	FollowChains(ctx context.Context, req resendtype.ChainRequest) ([]resendtype.ChainFollowed, error)
}

// Core serves the operators' use cases. It is safe for concurrent use.
type Core struct {
	cfg     Config
	store   *store.Store
	log     *slog.Logger
	stats   *statsCache
	actions *prometheus.CounterVec
}

// New returns a Core for cfg, or an error starting with "invalid config".
func New(cfg Config) (*Core, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid config: "+format, args...)) }
	if cfg.Store == nil {
		bad("Store is required")
	}
	if cfg.QueryTimeout < 0 || cfg.ActionTimeout < 0 || cfg.StatsMaxAge < 0 || cfg.PreviewTTL < 0 {
		bad("QueryTimeout, ActionTimeout, StatsMaxAge and PreviewTTL must not be negative")
	}
	if cfg.MaxBulk < 0 {
		bad("MaxBulk %d is negative", cfg.MaxBulk)
	}
	if cfg.MaxFieldScan < 0 {
		bad("MaxFieldScan %d is negative", cfg.MaxFieldScan)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Payloads == nil {
		d, err := payload.New(payload.Config{})
		if err != nil {
			return nil, err
		}
		cfg.Payloads = d
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.ActionTimeout == 0 {
		cfg.ActionTimeout = DefaultActionTimeout
	}
	if cfg.MaxBulk == 0 {
		cfg.MaxBulk = DefaultMaxBulk
	}
	if cfg.MaxFieldScan == 0 {
		cfg.MaxFieldScan = DefaultMaxFieldScan
	}
	if cfg.StatsMaxAge == 0 {
		cfg.StatsMaxAge = DefaultStatsMaxAge
	}
	if cfg.PreviewTTL == 0 {
		cfg.PreviewTTL = DefaultPreviewTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Core{cfg: cfg, store: cfg.Store, log: cfg.Logger}
	c.stats = newStatsCache(cfg.Store.FailureStats, cfg.StatsMaxAge, cfg.QueryTimeout, cfg.Now, cfg.Logger)
	c.actions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redrive_operator_action_items_total",
		Help: "Failures that operators asked to retry or close (API and UI), by action and outcome.",
	}, []string{"action", "outcome"})
	if cfg.Registerer != nil {
		set := promreg.New(cfg.Registerer)
		c.actions = promreg.Register(set, c.actions)
		if err := set.Err(); err != nil {
			return nil, fmt.Errorf("register operator metrics: %w", err)
		}
	}
	return c, nil
}

// MaxBulk returns the most failures one action by filter may act on.
func (c *Core) MaxBulk() int { return c.cfg.MaxBulk }

// CanRetry reports whether this core resends (a Resender is configured).
func (c *Core) CanRetry() bool { return c.cfg.Resender != nil }

// QueryTimeout returns the bound of each read.
func (c *Core) QueryTimeout() time.Duration { return c.cfg.QueryTimeout }

// queryContext bounds a read.
func (c *Core) queryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.QueryTimeout)
}

// actionContext returns the context of a mutation: it survives the caller's end, so that an
// action runs to its end and its outcome is recorded, bounded by ActionTimeout.
func (c *Core) actionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ActionTimeout)
}
