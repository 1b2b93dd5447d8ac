package resend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/promreg"
	"github.com/redrive/redrive/store"
)

// Cluster is one Kafka cluster that resends go to: the failures read from it
// (store.ResendItem.Cluster) are produced back to it.
type Cluster struct {
	// Name is the cluster's name (store.ValidateClusterName). Required.
	Name string
	// Brokers is its bootstrap.servers list. Required unless Producer sets bootstrap.servers.
	Brokers string
	// Producer holds its extra librdkafka settings (security: SASL, TLS), applied over
	// Config.Producer's.
	Producer kafka.ConfigMap
}

// Route allows a resend of a failure read from cluster From to a topic of cluster To
// (ManualRequest.TargetCluster, a resend_to job's target cluster).
type Route struct {
	From, To string
}

// ErrClusterUnknown means a failure's cluster, or a target cluster, is not configured.
var ErrClusterUnknown = errors.New("kafka cluster is not configured")

// ErrCrossClusterRefused means a resend to another cluster than the failure's own is not
// among the allowed routes (Config.CrossCluster).
var ErrCrossClusterRefused = errors.New("resend to another kafka cluster is not allowed")

// clusterOf returns name, or store.DefaultCluster for "".
func clusterOf(name string) string {
	if name == "" {
		return store.DefaultCluster
	}
	return name
}

// ErrClusterDown means the cluster's brokers did not acknowledge the last resends: the
// records to it are not sent until a probe gets through (clusterProbeInterval).
var ErrClusterDown = errors.New("kafka cluster unreachable: resends to it wait")

// clusterProbeInterval is how often a batch is let through to a cluster that is down, to see
// whether it is back.
const clusterProbeInterval = 5 * time.Second

// router sends each record to the cluster of its failure, over one publisher per cluster. A
// cluster whose brokers stop acknowledging is marked down: its records then fail at once
// (they stay due, spaced by the send backoff) instead of holding every batch for the send
// timeout, so that resends to the other clusters keep their pace.
type router struct {
	names   []string
	pubs    map[string]*clusterPublisher
	routes  map[Route]bool
	metrics *clusterMetrics
}

// clusterPublisher is a cluster's publisher and its health.
type clusterPublisher struct {
	name string
	pub  *publisher
	// breaker makes the cluster's records fail at once while it is down; only with several
	// clusters, where they would hold the others' (with one, a batch just waits, as ever).
	breaker bool
	// downSince is the UnixNano when the cluster went down, 0 while it is up; probeAt is when
	// the next probe may go.
	downSince atomic.Int64
	probeAt   atomic.Int64
	lastErr   atomic.Pointer[error]
}

// clusters returns the configured clusters: Clusters, or the one store.DefaultCluster of
// Brokers and Producer.
func (c Config) clusters() []Cluster {
	if len(c.Clusters) > 0 {
		return c.Clusters
	}
	return []Cluster{{Name: store.DefaultCluster, Brokers: c.Brokers}}
}

// validateClusters checks Clusters and CrossCluster.
func (c Config) validateClusters() []error {
	var errs []error
	seen := map[string]bool{}
	for i, cl := range c.Clusters {
		if err := store.ValidateClusterName(cl.Name); err != nil {
			errs = append(errs, fmt.Errorf("invalid config: Clusters[%d].Name %v", i, err))
			continue
		}
		if seen[cl.Name] {
			errs = append(errs, fmt.Errorf("invalid config: Clusters[%d].Name %q is given twice", i, cl.Name))
		}
		seen[cl.Name] = true
		if cl.Brokers == "" {
			if v, _ := cl.Producer.Get("bootstrap.servers", ""); v == "" {
				if v, _ := c.Producer.Get("bootstrap.servers", ""); v == "" {
					errs = append(errs, fmt.Errorf("invalid config: Clusters[%d] (%s): Brokers is required", i, cl.Name))
				}
			}
		}
	}
	names := map[string]bool{}
	for _, cl := range c.clusters() {
		names[cl.Name] = true
	}
	for i, r := range c.CrossCluster {
		for _, n := range []string{r.From, r.To} {
			if !names[n] {
				errs = append(errs, fmt.Errorf("invalid config: CrossCluster[%d]: cluster %q is not configured", i, n))
			}
		}
	}
	return errs
}

// clusterConfig returns cfg for the publisher of cl.
func (c Config) clusterConfig(cl Cluster) Config {
	out := c
	out.Brokers = cl.Brokers
	out.Producer = make(kafka.ConfigMap, len(c.Producer)+len(cl.Producer))
	for k, v := range c.Producer {
		out.Producer[k] = v
	}
	for k, v := range cl.Producer {
		out.Producer[k] = v
	}
	if len(c.Clusters) > 0 {
		out.Logger = c.Logger.With("cluster", cl.Name)
	}
	return out
}

func newRouter(cfg Config, m *clusterMetrics) (*router, error) {
	r := &router{pubs: map[string]*clusterPublisher{}, routes: map[Route]bool{}, metrics: m}
	for _, rt := range cfg.CrossCluster {
		r.routes[rt] = true
	}
	for _, cl := range cfg.clusters() {
		p, err := newPublisher(cfg.clusterConfig(cl))
		if err != nil {
			r.close()
			return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		r.names = append(r.names, cl.Name)
		r.pubs[cl.Name] = &clusterPublisher{name: cl.Name, pub: p, breaker: len(cfg.Clusters) > 1}
		m.up.WithLabelValues(cl.Name).Set(1)
	}
	return r, nil
}

// allowed reports whether a failure of cluster from may be resent to cluster to.
func (r *router) allowed(from, to string) bool {
	if from == "" {
		from = store.DefaultCluster
	}
	return from == to || r.routes[Route{From: from, To: to}]
}

// known reports whether the cluster is configured.
func (r *router) known(name string) bool { _, ok := r.pubs[name]; return ok }

// send produces each item to its cluster (store.ResendItem.Cluster; "" is
// store.DefaultCluster), the clusters at once, and returns one error per item as
// publisher.send does (ctx parents the spans).
func (r *router) send(ctx context.Context, items []store.ResendItem) []error {
	errs := make([]error, len(items))
	if len(items) == 0 {
		return errs
	}
	groups := map[string][]int{}
	for i := range items {
		name := items[i].Destination()
		if !r.allowed(items[i].Cluster, name) {
			errs[i] = fmt.Errorf("%w: from cluster %s to %s", ErrCrossClusterRefused, clusterOf(items[i].Cluster), name)
			continue
		}
		groups[name] = append(groups[name], i)
	}
	var wg sync.WaitGroup
	for name, idx := range groups {
		cp := r.pubs[name]
		if cp == nil {
			for _, i := range idx {
				errs[i] = fmt.Errorf("%w: %q", ErrClusterUnknown, name)
			}
			continue
		}
		send := func() {
			part := make([]store.ResendItem, len(idx))
			for j, i := range idx {
				part[j] = items[i]
			}
			perrs := cp.send(ctx, part)
			acked := 0
			for j, i := range idx {
				errs[i] = perrs[j]
				if perrs[j] == nil {
					acked++
				}
			}
			r.metrics.records.WithLabelValues(name, "acknowledged").Add(float64(acked))
			r.metrics.records.WithLabelValues(name, "failed").Add(float64(len(idx) - acked))
			if cp.downSince.Load() != 0 {
				r.metrics.up.WithLabelValues(name).Set(0)
			} else {
				r.metrics.up.WithLabelValues(name).Set(1)
			}
		}
		if len(groups) == 1 {
			send()
			break
		}
		wg.Go(send)
	}
	wg.Wait()
	return errs
}

// send sends items to the cluster unless it is down and no probe is due.
func (cp *clusterPublisher) send(ctx context.Context, items []store.ResendItem) []error {
	now := time.Now()
	if cp.breaker && cp.downSince.Load() != 0 {
		probe := cp.probeAt.Load()
		if now.UnixNano() < probe || !cp.probeAt.CompareAndSwap(probe, now.Add(clusterProbeInterval).UnixNano()) {
			errs := make([]error, len(items))
			for i := range errs {
				errs[i] = fmt.Errorf("%w (cluster %s)", ErrClusterDown, cp.name)
			}
			return errs
		}
	}
	errs := cp.pub.send(ctx, items)
	acked, unreported := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			acked++
		case isUnreachable(err):
			unreported++
		}
	}
	switch {
	case acked > 0:
		if cp.downSince.Swap(0) != 0 {
			cp.pub.log.Info("kafka cluster reachable again: resends to it go on", "cluster", cp.name)
		}
		cp.lastErr.Store(nil)
	case unreported > 0:
		err := errs[slices.IndexFunc(errs, isUnreachable)]
		cp.lastErr.Store(&err)
		// The next probe goes an interval after this one's answer (a send can take longer).
		cp.probeAt.Store(time.Now().Add(clusterProbeInterval).UnixNano())
		if cp.downSince.CompareAndSwap(0, now.UnixNano()) {
			cp.pub.log.Warn("kafka cluster unreachable: resends to it wait, the other clusters' go on", "cluster", cp.name, "error", err)
		}
	}
	return errs
}

// isUnreachable reports whether a send error says the brokers did not answer (no
// acknowledgement in time), not that they refused the record.
func isUnreachable(err error) bool {
	if errors.Is(err, errNoReport) {
		return true
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		switch kerr.Code() {
		case kafka.ErrMsgTimedOut, kafka.ErrTimedOut, kafka.ErrTransport, kafka.ErrAllBrokersDown, kafka.ErrTimedOutQueue:
			return true
		}
	}
	return false
}

// down returns, per cluster that is down, the last error that said so.
func (r *router) down() map[string]error {
	out := map[string]error{}
	for name, cp := range r.pubs {
		if cp.downSince.Load() == 0 {
			continue
		}
		err := ErrClusterDown
		if p := cp.lastErr.Load(); p != nil {
			err = *p
		}
		out[name] = err
	}
	return out
}

func (r *router) close() {
	var wg sync.WaitGroup
	for _, cp := range r.pubs {
		wg.Go(cp.pub.close)
	}
	wg.Wait()
}

// producerConfigOf returns the producer settings of the named cluster's publisher.
func (r *router) producerConfigOf(name string) (kafka.ConfigMap, bool) {
	cp := r.pubs[name]
	if cp == nil {
		return nil, false
	}
	return cp.pub.config, true
}

// clusterMetrics are the per-cluster metrics of resends; the cluster label takes the
// configured names only.
type clusterMetrics struct {
	records *prometheus.CounterVec
	up      *prometheus.GaugeVec
}

func newClusterMetrics(reg prometheus.Registerer) (*clusterMetrics, error) {
	m := &clusterMetrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_resend_cluster_records_total",
			Help: "Resent records by Kafka cluster and result (acknowledged, failed).",
		}, []string{"cluster", "result"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "redrive_resend_cluster_up",
			Help: "1 while the Kafka cluster acknowledges resends, 0 while it is unreachable and its resends wait.",
		}, []string{"cluster"}),
	}
	if reg == nil {
		return m, nil
	}
	set := promreg.New(reg)
	m.records = promreg.Register(set, m.records)
	m.up = promreg.Register(set, m.up)
	return m, set.Err()
}

// CrossClusterAllowed reports whether a failure read from cluster from may be resent to a
// topic of cluster to: the same cluster, or an allowed route (Config.CrossCluster).
func (r *Resender) CrossClusterAllowed(from, to string) bool {
	return r.s.pub.known(to) && r.s.pub.allowed(from, to)
}

// Clusters returns the names of the clusters resends go to, in configuration order.
func (r *Resender) Clusters() []string { return r.s.Clusters() }

// Clusters returns the names of the clusters resends go to, in configuration order.
func (s *Scheduler) Clusters() []string { return slices.Clone(s.pub.names) }

// ClusterErr returns why resends to the named cluster wait (its brokers did not acknowledge
// the last ones), nil while it is up, and an error wrapping ErrClusterUnknown for a cluster
// that is not configured.
func (s *Scheduler) ClusterErr(_ context.Context, name string) error {
	if !s.pub.known(name) {
		return fmt.Errorf("%w: %q", ErrClusterUnknown, name)
	}
	return s.pub.down()[name]
}
