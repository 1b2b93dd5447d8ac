package resend

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/kafkalog"
	"github.com/redrive/redrive/store"
)

// Partitioning says which partition a resent record goes to.
type Partitioning int

const (
	// PartitionByKey lets the producer's partitioner choose by the record's key, as the
	// original producer did (see Config.Partitioner). The default.
	PartitionByKey Partitioning = iota
	// PartitionOriginal sends the record to the partition it was originally read from.
	PartitionOriginal
)

// String returns "key" or "original".
func (p Partitioning) String() string {
	switch p {
	case PartitionByKey:
		return "key"
	case PartitionOriginal:
		return "original"
	}
	return fmt.Sprintf("Partitioning(%d)", int(p))
}

// Config configures a Scheduler, its manual Resender and its housekeeping. A zero field means
// the documented default.
type Config struct {
	// Store is the failure store. Required.
	Store *store.Store
	// Brokers is the bootstrap.servers list of the Kafka cluster that the originals are
	// produced to. Required unless Producer sets bootstrap.servers.
	Brokers string
	// Producer holds extra librdkafka settings (security, client.id, batch sizes, ...) applied
	// over the defaults. enable.idempotence and acks cannot be weakened: a resend is idempotent
	// and waits for all in-sync replicas.
	Producer kafka.ConfigMap
	// Clusters are the Kafka clusters resends go to, each failure's to the cluster it was read
	// from (store.ResendItem.Cluster): one producer per cluster. Empty means one cluster,
	// store.DefaultCluster, of Brokers and Producer; given, Brokers is not used and Producer
	// holds the settings common to every cluster.
	Clusters []Cluster
	// CrossCluster allows resends of a failure to a topic of another cluster than its own
	// (ManualRequest.TargetCluster), per pair of clusters; none is allowed without it.
	CrossCluster []Route

	// ServiceName is this service's name, written to the jeap_eh_error_handling_service header
	// of every resent record. Defaults to "redrive".
	ServiceName string
	// InstanceID names this instance as the owner of its claims; it must differ between
	// instances. Defaults to "<hostname>-<pid>-<random>".
	InstanceID string

	// DisableAutomatic turns automatic resends off on this instance: Run claims no due
	// failures (other instances do), while manual resends and housekeeping still work.
	DisableAutomatic bool
	// Interval is the time between two scheduler rounds; a round claims and sends due failures
	// until none is left. Defaults to 1s. A negative Interval is read as DisableAutomatic, the
	// way to disable before that field, and kept for the callers written then.
	Interval time.Duration
	// BatchSize is how many due failures one claim takes. Defaults to 500.
	BatchSize int
	// Concurrency is how many claimed batches one instance sends at once. Defaults to 4.
	Concurrency int
	// Lease is how long a claim holds a failure. The claims of an instance that crashed return
	// after it, so a crash between send and mark resends a record once more. It must outlast
	// the longest a batch can take, 2 × SendTimeout + 35 s (waiting for room in the producer's
	// queue, for the acknowledgements, and for the database). Defaults to 2m, or that minimum
	// when it is longer.
	Lease time.Duration
	// SendTimeout bounds the wait for one record's acknowledgement (librdkafka
	// message.timeout.ms). Defaults to 30s.
	SendTimeout time.Duration
	// Linger is how long the producer waits to fill a batch (librdkafka linger.ms).
	// Defaults to 5ms.
	Linger time.Duration
	// Partitioning chooses the partition of a resent record. Defaults to PartitionByKey.
	Partitioning Partitioning
	// Partitioner is the librdkafka partitioner used with PartitionByKey. Defaults to
	// "murmur2_random", the Java client's: a keyed record goes to the partition that a Java
	// (or franz-go) producer chose for it. Use "consistent_random" for records first produced
	// with librdkafka's default.
	Partitioner string

	// Backoff is the retry policy. The scheduler uses its MaxAttempts: a due failure whose
	// attempt number reaches it becomes PERMANENT with reason "retries exhausted" instead of
	// being sent. Defaults to DefaultBackoff().
	Backoff Backoff
	// SendBackoff spaces the next resend of a failure whose resend was not acknowledged, by its
	// number of resend failures. Defaults to DefaultSendBackoff(): 10 s × 2^n, capped at 15 min,
	// ±10 % jitter, never exhausted.
	SendBackoff Backoff

	// ManualRate limits manual resends, in records per second (a token bucket). Defaults to 200.
	ManualRate float64
	// ManualBurst is the token bucket's size. Defaults to ManualRate, at least 1.
	ManualBurst int
	// MaxManualIDs bounds the ids of one ResendIDs call. Defaults to 1000.
	MaxManualIDs int

	// Housekeeping configures the deletion of old failures.
	Housekeeping HousekeepingConfig

	// ChainHooks are called while an ordering chain is released, for fault injection in
	// tests.
	ChainHooks ChainHooks
	// TracerProvider, when set, traces every resent record with a span linked to the trace of
	// the original's stored traceparent header, and the resent record carries a traceparent of
	// that span instead (docs/operations.md, Tracing). Defaults to none: no spans, and the
	// stored headers go out as they are.
	TracerProvider trace.TracerProvider

	// Logger receives the scheduler's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Registerer registers the metrics. Defaults to none: metrics are kept but not exported.
	Registerer prometheus.Registerer
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// HousekeepingConfig configures the deletion of old failures. RETRY_PENDING failures are never
// deleted; audit log entries are kept.
type HousekeepingConfig struct {
	// Disable turns housekeeping off on this instance.
	Disable bool
	// Interval is the time between two housekeeping runs. Defaults to 10m. A negative Interval
	// is read as Disable, the way to disable before that field, and kept for the callers
	// written then.
	Interval time.Duration
	// ResolvedAge is the age at which RESENT and CLOSED failures are deleted, counted from when
	// they were resent or closed. Defaults to 30 days.
	ResolvedAge time.Duration
	// PermanentAge is the age at which PERMANENT failures are deleted, counted from their last
	// change. Defaults to 180 days.
	PermanentAge time.Duration
	// AuditAge, when positive, is the age at which the weeks of the audit log and of the items
	// of finished jobs are dropped (store.DropExpiredLogPartitions). Zero keeps them.
	AuditAge time.Duration
	// BatchSize is how many failures one delete statement removes from the default partition.
	// Defaults to 1000.
	BatchSize int
	// PartitionWidth is the period of one partition of the failure tables, a whole number of
	// days. Defaults to 7 days. A change applies to the partitions created from then on.
	PartitionWidth time.Duration
	// PartitionsAhead is how far ahead of now the partitions are created. Defaults to 28 days.
	PartitionsAhead time.Duration
	// MaxCarry is the most failures not yet expired that retention carries forward from a
	// partition whose range is older than the shorter age into the default partition; a
	// partition with more waits until its range is older than the longer age. Defaults to
	// 10,000; negative means no limit.
	MaxCarry int64
}

// DefaultSendBackoff returns the default spacing of resends that the broker did not
// acknowledge: 10 s × 2^n, capped at 15 min, ±10 % jitter, never exhausted.
func DefaultSendBackoff() Backoff {
	return Backoff{Base: 10 * time.Second, Factor: 2, Max: 15 * time.Minute, MaxAttempts: math.MaxInt}.withDefaults()
}

// Defaults of Config.
const (
	DefaultServiceName  = "redrive"
	DefaultInterval     = time.Second
	DefaultBatchSize    = 500
	DefaultConcurrency  = 4
	DefaultLease        = 2 * time.Minute
	DefaultSendTimeout  = 30 * time.Second
	DefaultLinger       = 5 * time.Millisecond
	DefaultPartitioner  = "murmur2_random"
	DefaultManualRate   = 200
	DefaultMaxManualIDs = 1000

	DefaultHousekeepingInterval = 10 * time.Minute
	DefaultResolvedAge          = 30 * 24 * time.Hour
	DefaultPermanentAge         = 180 * 24 * time.Hour
	DefaultHousekeepingBatch    = 1000
)

// withDefaults fills the zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid config: "+format, args...)) }
	if c.Store == nil {
		bad("Store is required")
	}
	if c.Producer == nil {
		c.Producer = kafka.ConfigMap{}
	}
	errs = append(errs, c.validateClusters()...)
	if c.Brokers == "" && len(c.Clusters) == 0 {
		if v, _ := c.Producer.Get("bootstrap.servers", ""); v == "" {
			bad("Brokers is required")
		}
	}
	for _, k := range []string{"enable.idempotence", "acks", "request.required.acks"} {
		if v, ok := c.Producer[k]; ok {
			s := strings.ToLower(fmt.Sprint(v))
			if s != "true" && s != "all" && s != "-1" {
				bad("Producer[%q] = %v: resends need an idempotent producer with acks=all", k, v)
			}
		}
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.InstanceID == "" {
		c.InstanceID = defaultInstanceID()
	}
	if c.Interval < 0 {
		c.DisableAutomatic, c.Interval = true, 0
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchSize < 0 {
		bad("BatchSize %d is negative", c.BatchSize)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Concurrency < 0 {
		bad("Concurrency %d is negative", c.Concurrency)
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.SendTimeout < time.Millisecond {
		bad("SendTimeout %s is below 1ms", c.SendTimeout)
	}
	if c.Lease == 0 {
		c.Lease = max(DefaultLease, c.batchTimeout())
	}
	if c.Lease < c.batchTimeout() {
		bad("Lease %s must be at least 2 × SendTimeout + %s = %s", c.Lease, reportGrace+markTimeout, c.batchTimeout())
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.Linger < 0 {
		bad("Linger %s is negative", c.Linger)
	}
	switch c.Partitioning {
	case PartitionByKey, PartitionOriginal:
	default:
		bad("Partitioning %d is unknown", int(c.Partitioning))
	}
	if c.Partitioner == "" {
		c.Partitioner = DefaultPartitioner
	}
	if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, err)
	}
	c.Backoff = c.Backoff.withDefaults()
	if sb := c.SendBackoff; sb.Base == 0 && sb.Factor == 0 && sb.Max == 0 && sb.Jitter == 0 && sb.MaxAttempts == 0 {
		rnd := sb.Rand
		c.SendBackoff = DefaultSendBackoff()
		if rnd != nil {
			c.SendBackoff.Rand = rnd
		}
	} else if err := c.SendBackoff.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("SendBackoff: %w", err))
	}
	c.SendBackoff = c.SendBackoff.withDefaults()
	if c.ManualRate == 0 {
		c.ManualRate = DefaultManualRate
	}
	if c.ManualRate < 0 || math.IsNaN(c.ManualRate) {
		bad("ManualRate %g must be positive", c.ManualRate)
	}
	if c.ManualBurst == 0 {
		c.ManualBurst = max(1, int(c.ManualRate))
	}
	if c.ManualBurst < 0 {
		bad("ManualBurst %d is negative", c.ManualBurst)
	}
	if c.MaxManualIDs == 0 {
		c.MaxManualIDs = DefaultMaxManualIDs
	}
	if c.MaxManualIDs < 0 {
		bad("MaxManualIDs %d is negative", c.MaxManualIDs)
	}
	h := &c.Housekeeping
	if h.Interval < 0 {
		h.Disable, h.Interval = true, 0
	}
	if h.Interval == 0 {
		h.Interval = DefaultHousekeepingInterval
	}
	if h.ResolvedAge == 0 {
		h.ResolvedAge = DefaultResolvedAge
	}
	if h.PermanentAge == 0 {
		h.PermanentAge = DefaultPermanentAge
	}
	if h.ResolvedAge < 0 || h.PermanentAge < 0 || h.AuditAge < 0 {
		bad("Housekeeping ages must not be negative (ResolvedAge %s, PermanentAge %s, AuditAge %s)", h.ResolvedAge, h.PermanentAge, h.AuditAge)
	}
	if h.BatchSize == 0 {
		h.BatchSize = DefaultHousekeepingBatch
	}
	if h.BatchSize < 0 {
		bad("Housekeeping.BatchSize %d is negative", h.BatchSize)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, errors.Join(errs...)
}

// batchTimeout bounds one batch: room in the producer's queue (SendTimeout), the last
// acknowledgement (SendTimeout + reportGrace), and recording the outcome (markTimeout).
func (c Config) batchTimeout() time.Duration { return 2*c.SendTimeout + reportGrace + markTimeout }

// producerConfig returns the librdkafka settings of the resend producer.
func (c Config) producerConfig() kafka.ConfigMap {
	cfg := kafka.ConfigMap{
		"client.id":                 "redrive-resend",
		"linger.ms":                 int(c.Linger.Milliseconds()),
		"partitioner":               c.Partitioner,
		"go.delivery.report.fields": "none",
		kafkalog.Enable:             true,
	}
	if c.Brokers != "" {
		cfg["bootstrap.servers"] = c.Brokers
	}
	for k, v := range c.Producer {
		cfg[k] = v
	}
	// Not negotiable: checked in withDefaults, set here whatever Producer says.
	cfg["enable.idempotence"] = true
	cfg["acks"] = "all"
	cfg["message.timeout.ms"] = int(c.SendTimeout.Milliseconds())
	return cfg
}

func defaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "redrive"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
