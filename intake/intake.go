package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/kafkalog"
)

// Intake consumes the error topic into the store. Create it with New and run it with Run.
type Intake struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	// sources maps each topic read to its source.
	sources map[string]*Source
	topics  []string

	running       atomic.Bool
	storeErr      atomic.Pointer[error] // last failed write while it is retried
	deadLetterErr atomic.Pointer[error] // last unacknowledged dead-letter event while retried
	decodeErr     atomic.Pointer[error] // last transient decoding failure while retried
	kafkaErr      atomic.Pointer[error] // last failed metadata request to the brokers
	tracer        *intakeTracer         // nil: tracing off

	// polled, when set, is called with the size of the batch being collected after each
	// record polled (tests use it to stop the intake with a batch in flight).
	polled func(n int)
}

// New returns an Intake for cfg, or an "invalid config" error.
// consumerCloseTimeout bounds a consumer's Close at shutdown (kafkalog.CloseConsumer).
const consumerCloseTimeout = 10 * time.Second

func New(cfg Config) (*Intake, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Each intake's metrics carry its cluster: a bounded label, one value per configured
	// cluster, so that the intakes of several clusters register side by side.
	m, err := newMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"cluster": cfg.Cluster}, cfg.Registerer))
	if err != nil {
		return nil, err
	}
	in := &Intake{cfg: cfg, log: cfg.Logger.With("component", "intake", "cluster", cfg.Cluster), metrics: m, sources: map[string]*Source{}}
	in.tracer = newIntakeTracer(cfg.TracerProvider, cfg.GroupID)
	for _, src := range cfg.sources() {
		src.hashes = &traceHashes{}
		src.cluster = cfg.Cluster
		in.sources[src.Topic] = &src
		in.topics = append(in.topics, src.Topic)
	}
	return in, nil
}

// Cluster returns the name of the Kafka cluster the intake reads (Config.Cluster).
func (in *Intake) Cluster() string { return in.cfg.Cluster }

// KafkaErr returns the last failure to reach the cluster's brokers, nil while they answer: the
// part of Ready that concerns the cluster alone.
func (in *Intake) KafkaErr() error {
	if p := in.kafkaErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Ready returns nil when the intake runs and can store what it reads: not while a write to
// Postgres, a dead-letter event or a decoding that needs the schema registry is being retried.
func (in *Intake) Ready() error {
	if !in.running.Load() {
		return errors.New("intake is not running")
	}
	if p := in.storeErr.Load(); p != nil {
		return fmt.Errorf("intake cannot write to postgres: %w", *p)
	}
	if p := in.deadLetterErr.Load(); p != nil {
		return fmt.Errorf("intake cannot publish to the dead-letter topic: %w", *p)
	}
	if p := in.decodeErr.Load(); p != nil {
		return fmt.Errorf("intake cannot reach the schema registry: %w", *p)
	}
	if p := in.kafkaErr.Load(); p != nil {
		return fmt.Errorf("intake cannot reach the Kafka brokers: %w", *p)
	}
	return nil
}

// watchKafka asks the brokers for the error topic's metadata every KafkaCheckInterval until
// stop is closed, and keeps the last failure for Ready: an idle intake cut off from Kafka says
// so too.
func (in *Intake) watchKafka(cons *kafka.Consumer, stop <-chan struct{}) {
	t := time.NewTicker(in.cfg.KafkaCheckInterval)
	defer t.Stop()
	topic := in.topics[0]
	for {
		timeout := min(in.cfg.KafkaCheckInterval, 10*time.Second)
		if _, err := cons.GetMetadata(&topic, false, int(timeout/time.Millisecond)); err != nil {
			if in.kafkaErr.Load() == nil {
				in.log.Warn("Kafka brokers unreachable", "error", err)
			}
			in.kafkaErr.Store(&err)
		} else if in.kafkaErr.Swap(nil) != nil {
			in.log.Info("Kafka brokers reachable again")
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Run consumes the error topic until ctx ends, then finishes the batch in flight (within
// Config.ShutdownTimeout), commits it and closes the consumer and producer. It returns nil on
// a shutdown by ctx, and an error when the Kafka clients cannot be created or fail fatally.
func (in *Intake) Run(ctx context.Context) error {
	if !in.running.CompareAndSwap(false, true) {
		return errors.New("intake: already running")
	}
	defer in.running.Store(false)
	in.storeErr.Store(nil)
	in.deadLetterErr.Store(nil)
	in.decodeErr.Store(nil)
	in.kafkaErr.Store(nil)

	cons, err := kafka.NewConsumer(in.consumerConfig())
	if err != nil {
		return fmt.Errorf("intake: new consumer: %w", err)
	}
	stopConsumerLogs := in.forwardLogs("consumer", cons.Logs())
	prod, err := kafka.NewProducer(in.producerConfig())
	if err != nil {
		_ = cons.Close()
		stopConsumerLogs()
		return fmt.Errorf("intake: new dead-letter producer: %w", err)
	}
	stopProducerLogs := in.forwardLogs("producer", prod.Logs())
	producerEvents := make(chan struct{})
	go func() { // delivery reports go to per-batch channels; this sees client-level errors
		defer close(producerEvents)
		for ev := range prod.Events() {
			if e, ok := ev.(kafka.Error); ok {
				in.log.Warn("dead-letter producer error", "error", e)
			}
		}
	}()
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		in.watchKafka(cons, stopWatch)
	}()
	defer func() {
		close(stopWatch)
		<-watchDone
		prod.Close()
		<-producerEvents
		stopProducerLogs()
		switch err := kafkalog.CloseConsumer(cons, consumerCloseTimeout); {
		case errors.Is(err, kafkalog.ErrCloseTimeout):
			// Its log channel stays open with it: do not wait for it.
			in.log.Error("close consumer: librdkafka did not finish closing; stopping without it (its uncommitted records are read again)", "error", err)
		case err != nil:
			in.log.Warn("close consumer", "error", err)
			stopConsumerLogs()
		default:
			stopConsumerLogs()
		}
	}()
	if err := cons.SubscribeTopics(in.topics, nil); err != nil {
		return fmt.Errorf("intake: subscribe to %s: %w", strings.Join(in.topics, ", "), err)
	}
	in.logSources()
	in.log.Info("intake started", "topics", in.topics, "group", in.cfg.GroupID, "group_instance_id", in.cfg.GroupInstanceID, "dead_letter_topic", in.cfg.DeadLetterTopic)

	// The poller polls and decodes while Writers writers store the batches, each its share of
	// the causing messages, in order; a committer commits each batch's offsets once all its
	// parts are written, batch after batch. After ctx ends, writing continues for at most
	// ShutdownTimeout.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var shutdownOnce sync.Once
	beginShutdown := func() {
		shutdownOnce.Do(func() { time.AfterFunc(in.cfg.ShutdownTimeout, cancelWork) })
	}
	stopAfter := context.AfterFunc(ctx, beginShutdown)
	defer stopAfter()

	jobs := make([]chan job, in.cfg.Writers)
	dones := make(chan done, 2*in.cfg.Writers)
	var writers sync.WaitGroup
	for i := range jobs {
		jobs[i] = make(chan job, 1)
		writers.Add(1)
		go func() {
			defer writers.Done()
			in.writeLoop(workCtx, prod, jobs[i], dones)
		}()
	}
	go func() {
		writers.Wait()
		close(dones)
	}()
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		in.commitLoop(cons, dones)
	}()

	var runErr error
	var seq uint64
	for {
		msgs, err := in.collect(ctx, cons)
		if err != nil {
			runErr = err
			beginShutdown()
			break
		}
		if len(msgs) > 0 {
			seq++
			b, parts := in.split(seq, msgs)
			for i, recs := range parts {
				if len(recs) == 0 {
					continue
				}
				select {
				case jobs[i] <- job{batch: b, recs: recs}:
				case <-workCtx.Done(): // the batch stays uncommitted, and every later one
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	for _, c := range jobs {
		close(c)
	}
	<-committerDone
	in.log.Info("intake stopped")
	return runErr
}

// logSources logs each source, and what a source cannot know.
func (in *Intake) logSources() {
	for _, t := range in.topics {
		src := in.sources[t]
		in.log.Info("intake source", "source", src.String())
		switch {
		case src.Format == redrive.SourceConnect && src.OriginalTopic == "":
			in.log.Warn("Connect source without an original topic: records without the context headers "+
				"(errors.deadletterqueue.context.headers.enable=false) have no known origin and go to the dead-letter topic; "+
				"configure connect:TOPIC=ORIGINAL_TOPIC to keep them",
				"source", src.String(), "dead_letter_topic", in.cfg.DeadLetterTopic)
		case src.Format == redrive.SourceStreams:
			in.log.Info("Kafka Streams does not keep the original headers of a dead-lettered record: its resends carry none of them",
				"source", src.String())
		}
	}
}

// collect polls one batch: up to BatchSize records, waiting at most BatchWait after the
// first. It returns what it has when ctx ends, and an error only for a fatal consumer error.
func (in *Intake) collect(ctx context.Context, cons *kafka.Consumer) ([]*kafka.Message, error) {
	var msgs []*kafka.Message
	var deadline time.Time
	for len(msgs) < in.cfg.BatchSize {
		if ctx.Err() != nil {
			return msgs, nil
		}
		wait := 100 * time.Millisecond
		if len(msgs) > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			wait = min(wait, left)
		}
		switch ev := cons.Poll(int(wait.Milliseconds())).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				in.log.Warn("consumer error", "error", ev.TopicPartition.Error)
				continue
			}
			if len(msgs) == 0 {
				deadline = time.Now().Add(in.cfg.BatchWait)
			}
			msgs = append(msgs, ev)
			if in.polled != nil {
				in.polled(len(msgs))
			}
		case kafka.Error:
			if ev.IsFatal() {
				return nil, fmt.Errorf("intake: fatal consumer error: %w", ev)
			}
			in.log.Warn("consumer error", "error", ev)
		}
	}
	return msgs, nil
}

func (in *Intake) consumerConfig() *kafka.ConfigMap {
	cm := kafka.ConfigMap{
		"client.id":                "redrive-intake",
		"auto.offset.reset":        "earliest",
		"enable.auto.offset.store": false,
		// Prefetch at most 16 MiB (librdkafka's default is 64 MiB): a batch needs about 1 MiB,
		// and the rest is memory held for nothing.
		"queued.max.messages.kbytes": 16384,
		"go.logs.channel.enable":     true,
	}
	for k, v := range in.cfg.ConsumerConfig {
		cm[k] = v
	}
	cm["bootstrap.servers"] = in.cfg.Bootstrap
	cm["group.id"] = in.cfg.GroupID
	if in.cfg.GroupInstanceID != "" {
		cm["group.instance.id"] = in.cfg.GroupInstanceID
	}
	cm["enable.auto.commit"] = false
	return &cm
}

func (in *Intake) producerConfig() *kafka.ConfigMap {
	cm := kafka.ConfigMap{
		"client.id":              "redrive-intake-dead-letter",
		"acks":                   "all",
		"enable.idempotence":     true,
		"message.timeout.ms":     30000,
		"go.logs.channel.enable": true,
	}
	for k, v := range in.cfg.ProducerConfig {
		cm[k] = v
	}
	cm["bootstrap.servers"] = in.cfg.Bootstrap
	return &cm
}

func (in *Intake) forwardLogs(client string, logs chan kafka.LogEvent) func() {
	return kafkalog.Forward(in.log, client, logs)
}

// backoff doubles a delay from RetryMin up to RetryMax.
type backoff struct {
	next, max time.Duration
}

func (in *Intake) newBackoff() *backoff {
	return &backoff{next: in.cfg.RetryMin, max: in.cfg.RetryMax}
}

// wait sleeps for the current delay, or until ctx ends.
func (b *backoff) wait(ctx context.Context) error {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, b.max)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
