package intake

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// Defaults of Config.
const (
	DefaultGroupID         = "redrive-intake"
	DefaultBatchSize       = 1000
	DefaultBatchWait       = 100 * time.Millisecond
	DefaultRetryMin        = 100 * time.Millisecond
	DefaultRetryMax        = 5 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultKafkaCheckInterval is the default of Config.KafkaCheckInterval.
	DefaultKafkaCheckInterval = 15 * time.Second
	DefaultWriteTimeout       = 30 * time.Second
	DefaultWriters            = 2
	// MaxWriters bounds Config.Writers.
	MaxWriters              = 64
	DefaultPublisherSystem  = "redrive"
	DefaultPublisherService = "redrive-intake"
	// MaxBatchSize bounds Config.BatchSize.
	MaxBatchSize = 100_000
)

// Config configures an Intake.
type Config struct {
	// Store receives the failures. Required.
	Store *store.Store
	// NextAttempt says when a TEMPORARY failure is due for a resend (resend.Backoff.Next).
	// Required.
	NextAttempt store.NextAttemptFunc
	// Codec decodes the error topic's records and encodes the dead-letter events; its MaxSize
	// is the size limit of a record. Defaults to a codec without schema registry and with
	// avro.DefaultMaxSize.
	Codec *avro.Codec

	// Cluster names the Kafka cluster the intake reads (store.ValidateClusterName): every
	// failure it stores records it, and its resends go back there. Defaults to
	// store.DefaultCluster. One Intake reads one cluster; run one per cluster.
	Cluster string
	// Bootstrap is the Kafka bootstrap.servers list. Required.
	Bootstrap string
	// Topic is the error topic of MessageProcessingFailedEvents: the same as a Source of format
	// mpfe. Required unless Sources has an entry.
	Topic string
	// Sources are further topics to read, each in its format (Source, ParseSource): error
	// topics of MPFEs and foreign dead-letter topics (Spring Kafka, Kafka Connect, Kafka
	// Streams, raw copies). Every topic appears once, in Topic or here.
	Sources []Source
	// DeadLetterTopic receives the records that are not valid MPFEs, and the records of a
	// foreign source that its format cannot make sense of. Required; it must differ from every
	// source topic.
	DeadLetterTopic string
	// GroupID is the consumer group. Defaults to DefaultGroupID.
	GroupID string
	// GroupInstanceID, when set, makes the intake's consumer a static member of its group
	// (KIP-345, group.instance.id): a restarted instance with the same id takes its
	// partitions back at once instead of waiting for the session timeout to drop its former
	// self. Every instance needs its own id that stays the same across its restarts (a
	// StatefulSet pod's name). Empty: dynamic membership.
	GroupInstanceID string
	// ConsumerConfig and ProducerConfig hold extra librdkafka settings (security, tuning) that
	// override the defaults of the consumer and of the dead-letter producer.
	ConsumerConfig kafka.ConfigMap
	ProducerConfig kafka.ConfigMap

	// BatchSize bounds the records per batch. Defaults to DefaultBatchSize (1000); at most
	// MaxBatchSize.
	BatchSize int
	// Writers is how many transactions write to Postgres at once, each on its own connection
	// for its share of the causing messages (a hash modulo Writers), so that the failures of one
	// message are stored in order. Defaults to DefaultWriters (2); at most MaxWriters.
	Writers int
	// BatchWait bounds how long a batch waits for more records after its first. Defaults to
	// DefaultBatchWait (100ms).
	BatchWait time.Duration
	// RetryMin and RetryMax bound the backoff between attempts when Postgres or the
	// dead-letter topic fails. Default to 100ms and 5s.
	RetryMin, RetryMax time.Duration
	// WriteTimeout bounds one attempt to write a batch to Postgres: a database that hangs (a
	// locked table, a lost network) counts as failing. Defaults to DefaultWriteTimeout (30s).
	WriteTimeout time.Duration
	// ShutdownTimeout bounds how long Run finishes the batch in flight after its context ends.
	// Defaults to DefaultShutdownTimeout (10s).
	ShutdownTimeout time.Duration
	// KafkaCheckInterval is how often the intake asks the brokers for the error topic's metadata
	// to report on Ready whether Kafka is reachable. Defaults to DefaultKafkaCheckInterval (15s).
	KafkaCheckInterval time.Duration

	// PublisherSystem and PublisherService name the publisher of the dead-letter events.
	// Default to "redrive" and "redrive-intake".
	PublisherSystem, PublisherService string

	// TracerProvider, when set, traces every polled batch with a span linked to the traces of
	// its records' originals (docs/operations.md, Tracing). Defaults to none: no spans.
	TracerProvider trace.TracerProvider
	// Logger receives the intake's logs, librdkafka's included. Defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the intake's metrics. Defaults to none (metrics are kept but not
	// exported).
	Registerer prometheus.Registerer
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// sources returns every source: the error topic (Topic) first, then Sources.
func (c Config) sources() []Source {
	out := make([]Source, 0, len(c.Sources)+1)
	if c.Topic != "" {
		out = append(out, Source{Format: redrive.SourceMPFE, Topic: c.Topic})
	}
	return append(out, c.Sources...)
}

func (c Config) withDefaults() (Config, error) {
	if c.Codec == nil {
		codec, err := avro.NewCodec(avro.Config{})
		if err != nil {
			return c, err
		}
		c.Codec = codec
	}
	if c.GroupID == "" {
		c.GroupID = DefaultGroupID
	}
	if c.Cluster == "" {
		c.Cluster = store.DefaultCluster
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchWait == 0 {
		c.BatchWait = DefaultBatchWait
	}
	if c.Writers == 0 {
		c.Writers = DefaultWriters
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.KafkaCheckInterval == 0 {
		c.KafkaCheckInterval = DefaultKafkaCheckInterval
	}
	if c.PublisherSystem == "" {
		c.PublisherSystem = DefaultPublisherSystem
	}
	if c.PublisherService == "" {
		c.PublisherService = DefaultPublisherService
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid config: "+format, args...)) }
	if c.Store == nil {
		bad("Store is required")
	}
	if c.NextAttempt == nil {
		bad("NextAttempt is required")
	}
	if c.Bootstrap == "" {
		bad("Bootstrap is required")
	}
	if err := store.ValidateClusterName(c.Cluster); err != nil {
		bad("Cluster %v", err)
	}
	if c.Topic == "" && len(c.Sources) == 0 {
		bad("Topic or Sources is required")
	}
	if c.DeadLetterTopic == "" {
		bad("DeadLetterTopic is required")
	}
	seen := map[string]bool{}
	for _, src := range c.sources() {
		if err := src.validate(); err != nil {
			errs = append(errs, fmt.Errorf("invalid config: %w", err))
			continue
		}
		if seen[src.Topic] {
			bad("topic %q is read by two sources", src.Topic)
		}
		seen[src.Topic] = true
		if src.Topic == c.DeadLetterTopic {
			bad("DeadLetterTopic %q is a source topic (%s): a bad record would loop forever", c.DeadLetterTopic, src)
		}
		if src.OriginalTopic != "" && src.OriginalTopic == c.DeadLetterTopic {
			bad("source %s sends its records back to the DeadLetterTopic %q", src, c.DeadLetterTopic)
		}
	}
	if c.BatchSize < 0 || c.BatchSize > MaxBatchSize {
		bad("BatchSize %d must be between 1 and %d", c.BatchSize, MaxBatchSize)
	}
	if c.Writers < 0 || c.Writers > MaxWriters {
		bad("Writers %d must be between 1 and %d", c.Writers, MaxWriters)
	}
	if c.BatchWait < 0 {
		bad("BatchWait %s is negative", c.BatchWait)
	}
	if c.RetryMin < 0 || c.RetryMax < c.RetryMin {
		bad("RetryMin %s and RetryMax %s must satisfy 0 <= RetryMin <= RetryMax", c.RetryMin, c.RetryMax)
	}
	if c.WriteTimeout < 0 {
		bad("WriteTimeout %s is negative", c.WriteTimeout)
	}
	if c.ShutdownTimeout < 0 {
		bad("ShutdownTimeout %s is negative", c.ShutdownTimeout)
	}
	if c.KafkaCheckInterval < 0 {
		bad("KafkaCheckInterval %s is negative", c.KafkaCheckInterval)
	}
	if c.GroupInstanceID != strings.TrimSpace(c.GroupInstanceID) {
		bad("GroupInstanceID %q has leading or trailing spaces", c.GroupInstanceID)
	}
	for _, k := range []string{"enable.auto.commit", "group.id", "group.instance.id", "bootstrap.servers"} {
		if _, ok := c.ConsumerConfig[k]; ok {
			bad("ConsumerConfig may not set %q: the intake owns it", k)
		}
	}
	return errors.Join(errs...)
}
