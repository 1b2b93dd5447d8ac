package errorhandler

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/avro"
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
	DefaultFloodThreshold    = 100
	DefaultMaxBuffered       = 10000
	DefaultCommitInterval    = time.Second
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultRetryBackoff      = 100 * time.Millisecond
	DefaultMaxRetryBackoff   = 30 * time.Second
	DefaultInPlaceBackoff    = 100 * time.Millisecond
	DefaultInPlaceMaxBackoff = 5 * time.Second
)

// DeadLetterConfig configures the publishing of MPFEs, by a Runner or a standalone
// DeadLetterer of either adapter. The Kafka settings of the producer (brokers, client options)
// belong to the adapter.
type DeadLetterConfig struct {
	// ErrorTopic is the topic MPFEs are produced to. Required.
	ErrorTopic string
	// System and Service name this consumer in the MPFE's publisher. Required.
	System  string
	Service string
	// GroupID is the consumer group whose failures are published. Required: it is part of
	// every event's idempotenceId (see IdempotenceID), so that the same record dead-lettered
	// again after a crash is recognised as the same failure, while two groups failing on one
	// record are two failures. A Runner sets it to its own group.
	GroupID string
	// Registry, when set, frames MPFEs in the Confluent wire format with ids from this schema
	// registry; otherwise they use Avro single-object encoding. avro/franzsr adapts franz-go's
	// pure-Go registry client (no module of confluent-kafka-go is linked); avro/confluentsr
	// adapts confluent-kafka-go's.
	Registry avro.Registry
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
	// TracerProvider traces every dead-lettered record with a producer span, a child of the
	// record's W3C traceparent header, that ends when the error topic acknowledged the event
	// (or it was given up). Defaults to OpenTelemetry's global TracerProvider
	// (otel.SetTracerProvider): an application that does not use OpenTelemetry gets no-op
	// spans.
	TracerProvider trace.TracerProvider
	// Clock returns the current time. Defaults to time.Now.
	Clock func() time.Time
}

// SetDefaults validates c and fills in the documented defaults. The adapters' constructors
// call it; it returns an "invalid config: …" error naming every wrong field.
func (c *DeadLetterConfig) SetDefaults() error {
	var errs []error
	if c.ErrorTopic == "" {
		errs = append(errs, errors.New("ErrorTopic is empty"))
	}
	if c.System == "" {
		errs = append(errs, errors.New("System is empty"))
	}
	if c.Service == "" {
		errs = append(errs, errors.New("Service is empty"))
	}
	if c.GroupID == "" {
		errs = append(errs, errors.New("GroupID is empty: it is part of every event's idempotenceId"))
	}
	if c.RetryBackoff < 0 || c.MaxRetryBackoff < 0 {
		errs = append(errs, errors.New("RetryBackoff and MaxRetryBackoff must not be negative"))
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
		c.Logger = DiscardLogger()
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return nil
}

// InPlaceRetry retries the handler for the same record before the process policy applies: a
// short transient failure (a database blip) then costs a delay, not a trip through the error
// topic. The record's partition waits, in order, while every other partition continues; the
// consumer keeps polling, so it stays in its group through long backoffs. A retry that succeeds
// produces no event; when the last attempt fails, the process policy applies and a dead-letter
// event records the number of attempts (metadata entry avro.InPlaceAttemptsEntry).
type InPlaceRetry struct {
	// Attempts is the most times the handler is called for one record, the first call
	// included. 0 or 1 disables in-place retries.
	Attempts int
	// Backoff is the delay before the first retry; it doubles per retry up to MaxBackoff.
	// Defaults to 100ms and 5s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Retryable says whether a failed attempt is retried in place. Defaults to failures
	// classified TEMPORARY (with the dead-letter Classifier, if any); a panic is UNKNOWN and so
	// not retried by default.
	Retryable func(err error) bool
}

// Enabled reports whether in-place retries are configured.
func (r InPlaceRetry) Enabled() bool { return r.Attempts > 1 }

// Config configures a Runner of either adapter for records with keys of type K and values of
// type V. The Kafka settings (brokers, client options) are the adapter's.
type Config[K, V any] struct {
	// GroupID is the consumer group. Required.
	GroupID string
	// Topics are the topics to consume. Required.
	Topics []string

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
	// Retry retries a failing handler in place before ProcessPolicy applies. Off by default.
	Retry InPlaceRetry
	// OnDecodeError is called for every decode failure and may raise it (the decode policy
	// applies), skip the record, or substitute a value. Optional.
	OnDecodeError DecodeHook
	// FloodThreshold halts a partition with reason "flood" when it sees more than this many
	// failures in a row, instead of skipping or dead-lettering them all. Defaults to 100;
	// a negative value disables the guard.
	FloodThreshold int
	// Ordering turns on the per-key ordering guard for some topics. Off by default.
	Ordering Ordering

	// DeadLetter configures the MPFEs, used by the DeadLetter policy and by operator releases
	// with action dead-letter. Leave ErrorTopic empty to run without one (then no policy may be
	// DeadLetter). System, Service, GroupID, Logger, Metrics and Clock default to the Runner's.
	DeadLetter DeadLetterConfig

	// Concurrency is how many partitions are handled at once; records of one partition are
	// always handled in order. Defaults to GOMAXPROCS.
	Concurrency int
	// MaxBuffered is how many fetched records one partition may hold waiting for its worker
	// before it is paused until its handler catches up (after a grace of 50 ms to drain to
	// half, so that a worker briefly behind does not cost a refetch). Defaults to 10000.
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
	// TracerProvider traces every dead-lettered record with a producer span, a child of the
	// record's W3C traceparent header, that ends when the error topic acknowledged the event
	// (or it was given up). Defaults to OpenTelemetry's global TracerProvider
	// (otel.SetTracerProvider): an application that does not use OpenTelemetry gets no-op
	// spans.
	TracerProvider trace.TracerProvider
	// Clock returns the current time. Defaults to time.Now.
	Clock func() time.Time
}

// SetDefaults validates c and fills in the documented defaults. The adapters' New call it; it
// returns an "invalid config: …" error naming every wrong field.
func (c *Config[K, V]) SetDefaults() error {
	var errs []error
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
	if c.Retry.Attempts < 0 || c.Retry.Backoff < 0 || c.Retry.MaxBackoff < 0 {
		errs = append(errs, errors.New("Retry.Attempts, Retry.Backoff and Retry.MaxBackoff must not be negative"))
	}
	errs = append(errs, c.Ordering.validate(c.Topics, c.ProcessPolicy, c.DeadLetter.ErrorTopic)...)
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
	if c.Retry.Backoff == 0 {
		c.Retry.Backoff = DefaultInPlaceBackoff
	}
	if c.Retry.MaxBackoff == 0 {
		c.Retry.MaxBackoff = DefaultInPlaceMaxBackoff
	}
	c.Retry.MaxBackoff = max(c.Retry.MaxBackoff, c.Retry.Backoff)
	if c.Logger == nil {
		c.Logger = DiscardLogger()
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	dl := &c.DeadLetter
	if dl.System == "" {
		dl.System = c.System
	}
	if dl.Service == "" {
		dl.Service = c.Service
	}
	if dl.GroupID == "" {
		dl.GroupID = c.GroupID
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
	if dl.ErrorTopic != "" {
		probe := *dl
		if err := probe.SetDefaults(); err != nil {
			return fmt.Errorf("dead letter: %w", err)
		}
	}
	return nil
}

// DiscardLogger returns a logger that discards everything: the default Logger.
func DiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
