package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redrive/redrive"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/store"
)

// DefaultStateMetricsInterval is the default refresh interval of StateMetrics.
const DefaultStateMetricsInterval = 15 * time.Second

// StateMetricsConfig configures a StateMetrics.
type StateMetricsConfig struct {
	// Store is queried. Required.
	Store *store.Store
	// Interval is the time between two refreshes. Defaults to DefaultStateMetricsInterval.
	Interval time.Duration
	// Logger receives refresh errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the gauges. Defaults to none (kept but not exported).
	Registerer prometheus.Registerer
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Clusters are the names of the configured Kafka clusters, the values of the gauges'
	// cluster label. Failures of any other cluster (one removed from the configuration) are
	// counted under OtherCluster, so the label's cardinality is len(Clusters)+1. Defaults to
	// [redrive.DefaultCluster].
	Clusters []string
}

// OtherCluster is the cluster label of the state gauges for the failures of a cluster that is
// not configured (any more). It is no valid cluster name, so it never meets a configured one.
const OtherCluster = "_other"

// StateMetrics keeps the gauges of the stored failures current: redrive_failures{cluster,state}
// and redrive_failures_oldest_age_seconds{cluster,state} for the open states RETRY_PENDING and
// PERMANENT. Every configured cluster and OtherCluster has every series (0 when none).
type StateMetrics struct {
	cfg    StateMetricsConfig
	count  *prometheus.GaugeVec
	oldest *prometheus.GaugeVec
}

// openStates are the states whose oldest failure waits for something.
var openStates = []redrive.State{redrive.StateRetryPending, redrive.StatePermanent}

// NewStateMetrics returns a StateMetrics for cfg, or an "invalid config" error.
func NewStateMetrics(cfg StateMetricsConfig) (*StateMetrics, error) {
	if cfg.Store == nil {
		return nil, errors.New("invalid config: Store is required")
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("invalid config: Interval %s is negative", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultStateMetricsInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Clusters) == 0 {
		cfg.Clusters = []string{redrive.DefaultCluster}
	}
	for _, c := range cfg.Clusters {
		if err := redrive.ValidateClusterName(c); err != nil {
			return nil, fmt.Errorf("invalid config: Clusters: %w", err)
		}
	}
	m := &StateMetrics{
		cfg: cfg,
		count: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "redrive_failures",
			Help: "Stored failures by Kafka cluster and state, refreshed periodically; cluster=\"_other\" for clusters not configured.",
		}, []string{"cluster", "state"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "redrive_failures_oldest_age_seconds",
			Help: "Age of the oldest stored failure in an open state (RETRY_PENDING, PERMANENT) by Kafka cluster; 0 when none.",
		}, []string{"cluster", "state"}),
	}
	if err := errors.Join(cfg.Registerer.Register(m.count), cfg.Registerer.Register(m.oldest)); err != nil {
		return nil, fmt.Errorf("register state metrics: %w", err)
	}
	return m, nil
}

// Refresh queries the store once and updates the gauges.
func (m *StateMetrics) Refresh(ctx context.Context) error {
	byCluster, err := m.cfg.Store.StateStatsByCluster(ctx)
	if err != nil {
		return err
	}
	counts := map[string]map[redrive.State]int64{}
	oldest := map[string]map[redrive.State]time.Time{}
	for _, c := range append(slices.Clone(m.cfg.Clusters), OtherCluster) {
		counts[c], oldest[c] = map[redrive.State]int64{}, map[redrive.State]time.Time{}
	}
	for cluster, st := range byCluster {
		if !slices.Contains(m.cfg.Clusters, cluster) {
			cluster = OtherCluster
		}
		for state, n := range st.Counts {
			counts[cluster][state] += n
		}
		for state, t := range st.Oldest {
			if o, ok := oldest[cluster][state]; !ok || t.Before(o) {
				oldest[cluster][state] = t
			}
		}
	}
	now := m.cfg.Now()
	for cluster := range counts {
		for _, state := range redrive.States {
			m.count.WithLabelValues(cluster, string(state)).Set(float64(counts[cluster][state]))
		}
		for _, state := range openStates {
			age := 0.0
			if t, ok := oldest[cluster][state]; ok {
				age = max(0, now.Sub(t).Seconds())
			}
			m.oldest.WithLabelValues(cluster, string(state)).Set(age)
		}
	}
	return nil
}

// Run refreshes the gauges at once and then every Interval until ctx ends; errors are logged.
// It returns nil when ctx ends.
func (m *StateMetrics) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("refresh state metrics", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
