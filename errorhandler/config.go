package errorhandler

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/kafkalog"
)

// Policy says what happens to a record that failed in a phase.
type Policy int

// The three policies. The zero value is Fail.
const (
	// Fail halts the record's partition: it is paused and never committed past the record,
	// while every other partition and the process keep running. An operator releases it.
	Fail Policy = iota
	// Skip drops the record, counts it and logs a throttled warning.
	Skip
	// DeadLetter publishes an MPFE to the error topic; the record's offset is committed only
	// after the broker acknowledged it.
	DeadLetter
)

// String returns "fail", "skip" or "dead-letter".
func (p Policy) String() string {
	switch p {
	case Fail:
		return "fail"
	case Skip:
		return "skip"
	case DeadLetter:
		return "dead-letter"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Defaults of the configuration.
const (
	DefaultFloodThreshold  = 100
	DefaultMaxBuffered     = 10000
	DefaultCommitInterval  = time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = 30 * time.Second
)

// DeadLetterConfig configures a DeadLetterer.
type DeadLetterConfig struct {
	// Brokers is the bootstrap.servers list of the cluster holding the error topic. Required.
	Brokers string
	// ErrorTopic is the topic MPFEs are produced to. Required.
	ErrorTopic string
	// System and Service name this consumer in the MPFE's publisher. Required.
	System  string
	Service string
	// ProducerConfig overrides the producer defaults: acks=all, enable.idempotence=true,
	// linger.ms=20, compression.type=lz4, message.timeout.ms=30000 and message.max.bytes=16 MiB
	// + 64 KiB. The linger and the compression make fewer, larger produce requests when many
	// records fail at once, which costs the brokers far less per MPFE; an MPFE's record is
	// committed only after its acknowledgement anyway, so the linger only delays a commit that
	// waits for the commit interval. acks and enable.idempotence cannot be weakened.
	ProducerConfig kafka.ConfigMap
	// Registry, when set, frames MPFEs in the Confluent wire format with ids from this schema
	// registry; otherwise they use Avro single-object encoding.
	Registry schemaregistry.Client
	// Extractor reads the failed message's own id, type and version. Optional.
	Extractor Extractor
	// Classifier overrides the default classification. Optional.
	Classifier Classifier
	// RetryBackoff is the first delay before producing an MPFE again after a failed attempt; it
	// doubles per attempt up to MaxRetryBackoff. Defaults to 100ms and 30s.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// Logger receives the library's logs. Defaults to a logger that discards.
	Logger *slog.Logger
	// Metrics is where the collectors are registered. Defaults to prometheus.DefaultRegisterer.
	Metrics prometheus.Registerer
	// Clock returns the current time. Defaults to time.Now.
	Clock func() time.Time
}

func (c *DeadLetterConfig) setDefaults() error {
	var errs []error
	if c.Brokers == "" {
		errs = append(errs, errors.New("Brokers is empty"))
	}
	if c.ErrorTopic == "" {
		errs = append(errs, errors.New("ErrorTopic is empty"))
	}
	if c.System == "" {
		errs = append(errs, errors.New("System is empty"))
	}
	if c.Service == "" {
		errs = append(errs, errors.New("Service is empty"))
	}
	if c.RetryBackoff < 0 || c.MaxRetryBackoff < 0 {
		errs = append(errs, errors.New("RetryBackoff and MaxRetryBackoff must not be negative"))
	}
	for k, v := range c.ProducerConfig {
		switch k {
		case "acks", "request.required.acks":
			if s := strings.TrimSpace(fmt.Sprint(v)); s != "all" && s != "-1" {
				errs = append(errs, fmt.Errorf("ProducerConfig %s=%v: MPFEs need acks=all", k, v))
			}
		case "enable.idempotence":
			if b, ok := v.(bool); !ok || !b {
				if s := fmt.Sprint(v); s != "true" {
					errs = append(errs, fmt.Errorf("ProducerConfig %s=%v: MPFEs need an idempotent producer", k, v))
				}
			}
		case "go.delivery.reports", "go.events.channel.enable":
			errs = append(errs, fmt.Errorf("ProducerConfig %s cannot be set: delivery reports are how MPFEs are tracked", k))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid config: %w", errors.Join(errs...))
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxRetryBackoff == 0 {
		c.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	c.MaxRetryBackoff = max(c.MaxRetryBackoff, c.RetryBackoff)
	if c.Logger == nil {
		c.Logger = discardLogger()
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return nil
}

func (c *DeadLetterConfig) producerConfig() kafka.ConfigMap {
	cfg := kafka.ConfigMap{
		"bootstrap.servers":         c.Brokers,
		"client.id":                 "redrive-errorhandler",
		"acks":                      "all",
		"enable.idempotence":        true,
		"linger.ms":                 20,
		"compression.type":          "lz4",
		"message.timeout.ms":        30000,
		"message.max.bytes":         avro.DefaultMaxSize + 64<<10,
		"go.delivery.report.fields": "none",
		kafkalog.Enable:             true,
	}
	for k, v := range c.ProducerConfig {
		cfg[k] = v
	}
	return cfg
}

// Config configures a Runner for records with keys of type K and values of type V.
type Config[K, V any] struct {
	// Brokers is the bootstrap.servers list. Required.
	Brokers string
	// GroupID is the consumer group. Required.
	GroupID string
	// Topics are the topics to consume. Required.
	Topics []string
	// ConsumerConfig overrides the consumer defaults (auto.offset.reset=earliest). Commits and
	// offset stores belong to the runner: enable.auto.commit and enable.auto.offset.store
	// cannot be set.
	ConsumerConfig kafka.ConfigMap

	// System and Service name this consumer: in the MPFE's publisher, and Service for the
	// resend filter (a record whose jeap_eh_target_service header names another service is
	// acknowledged and skipped). Required.
	System  string
	Service string

	// KeyDecoder decodes keys. Optional: without it Record.Key is the zero K.
	KeyDecoder Decoder[K]
	// ValueDecoder decodes values. Required. It is not called for tombstones (nil values).
	ValueDecoder Decoder[V]
	// Handler processes decoded records. Required.
	Handler Handler[K, V]
	// Middleware wraps Handler; the first listed is outermost.
	Middleware []Middleware[K, V]

	// DecodePolicy and ProcessPolicy say what happens to a record that fails in each phase.
	// Both default to Fail.
	DecodePolicy  Policy
	ProcessPolicy Policy
	// OnDecodeError is called for every decode failure and may raise it (the decode policy
	// applies), skip the record, or substitute a value. Optional.
	OnDecodeError DecodeHook
	// FloodThreshold halts a partition with reason "flood" when it sees more than this many
	// failures in a row, instead of skipping or dead-lettering them all. Defaults to 100;
	// a negative value disables the guard.
	FloodThreshold int

	// DeadLetter configures the MPFE producer, used by the DeadLetter policy and by operator
	// releases with action dead-letter. Leave ErrorTopic empty to run without one (then no
	// policy may be DeadLetter). Brokers, System, Service, Logger, Metrics and Clock default
	// to the Runner's.
	DeadLetter DeadLetterConfig

	// Concurrency is how many partitions are handled at once; records of one partition are
	// always handled in order. Defaults to GOMAXPROCS.
	Concurrency int
	// MaxBuffered is how many fetched records one partition may hold before it is paused until
	// its handler catches up. Defaults to 10000.
	MaxBuffered int
	// CommitInterval is how often final offsets are committed. Defaults to 1s.
	CommitInterval time.Duration
	// ShutdownTimeout bounds how long a revoke or shutdown waits for running handlers and
	// in-flight MPFEs before letting go of uncommitted records. Defaults to 30s.
	ShutdownTimeout time.Duration

	// Logger receives the library's logs. Defaults to a logger that discards.
	Logger *slog.Logger
	// Metrics is where the collectors are registered. Defaults to prometheus.DefaultRegisterer.
	Metrics prometheus.Registerer
	// Clock returns the current time. Defaults to time.Now.
	Clock func() time.Time
}

func (c *Config[K, V]) setDefaults() error {
	var errs []error
	if c.Brokers == "" {
		errs = append(errs, errors.New("Brokers is empty"))
	}
	if c.GroupID == "" {
		errs = append(errs, errors.New("GroupID is empty"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("Topics is empty"))
	}
	if c.Service == "" {
		errs = append(errs, errors.New("Service is empty"))
	}
	if c.ValueDecoder == nil {
		errs = append(errs, errors.New("ValueDecoder is nil"))
	}
	if c.Handler == nil {
		errs = append(errs, errors.New("Handler is nil"))
	}
	for _, p := range []Policy{c.DecodePolicy, c.ProcessPolicy} {
		if p < Fail || p > DeadLetter {
			errs = append(errs, fmt.Errorf("unknown policy %v", p))
		}
	}
	if (c.DecodePolicy == DeadLetter || c.ProcessPolicy == DeadLetter) && c.DeadLetter.ErrorTopic == "" {
		errs = append(errs, errors.New("a DeadLetter policy needs DeadLetter.ErrorTopic"))
	}
	if c.Concurrency < 0 || c.MaxBuffered < 0 || c.CommitInterval < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("Concurrency, MaxBuffered, CommitInterval and ShutdownTimeout must not be negative"))
	}
	for k := range c.ConsumerConfig {
		switch k {
		case "enable.auto.commit", "enable.auto.offset.store", "go.events.channel.enable", "go.application.rebalance.enable":
			errs = append(errs, fmt.Errorf("ConsumerConfig %s cannot be set: commits and rebalances belong to the runner", k))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid config: %w", errors.Join(errs...))
	}
	if c.FloodThreshold == 0 {
		c.FloodThreshold = DefaultFloodThreshold
	}
	if c.Concurrency == 0 {
		c.Concurrency = runtime.GOMAXPROCS(0)
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = DefaultMaxBuffered
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Logger == nil {
		c.Logger = discardLogger()
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	dl := &c.DeadLetter
	if dl.Brokers == "" {
		dl.Brokers = c.Brokers
	}
	if dl.System == "" {
		dl.System = c.System
	}
	if dl.Service == "" {
		dl.Service = c.Service
	}
	if dl.Logger == nil {
		dl.Logger = c.Logger
	}
	if dl.Metrics == nil {
		dl.Metrics = c.Metrics
	}
	if dl.Clock == nil {
		dl.Clock = c.Clock
	}
	return nil
}

func (c *Config[K, V]) consumerConfig() kafka.ConfigMap {
	cfg := kafka.ConfigMap{
		"bootstrap.servers": c.Brokers,
		"group.id":          c.GroupID,
		"client.id":         "redrive-errorhandler",
		"auto.offset.reset": "earliest",
		kafkalog.Enable:     true,
	}
	for k, v := range c.ConsumerConfig {
		cfg[k] = v
	}
	cfg["enable.auto.commit"] = false
	cfg["enable.auto.offset.store"] = false
	return cfg
}
