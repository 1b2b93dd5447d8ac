package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/kafkalog"
	"github.com/redrive/redrive/store"
)

// Defaults of ReactivatorConfig.
const (
	// DefaultReactivateBatchSize is the default of ReactivatorConfig.BatchSize.
	DefaultReactivateBatchSize = 500
	// DefaultReactivateStaleAfter is the default of ReactivatorConfig.StaleAfter.
	DefaultReactivateStaleAfter = 2 * time.Minute
)

// ErrTruncated means a record of the dead-letter topic carries a cut original (it was too large
// for the topic): it cannot be fed back, and stays on the topic.
var ErrTruncated = errors.New("the dead-letter event carries a cut original")

// truncatedMarker is the part of a dead-letter event's description that says it was cut (wrap).
const truncatedMarker = "is too large for the dead-letter topic"

// ReactivatorConfig configures a Reactivator.
type ReactivatorConfig struct {
	// Store receives the failures and keeps the runs, their positions and audit. Required.
	Store *store.Store
	// NextAttempt says when a TEMPORARY failure is due (resend.Backoff.Next). Required.
	NextAttempt store.NextAttemptFunc
	// Codec decodes the dead-letter events and the error topics' events. Defaults to a codec
	// without schema registry. Give it the intake's codec, with the registry.
	Codec *avro.Codec
	// Cluster names the Kafka cluster of the dead-letter topic and of the sources
	// (Config.Cluster). Defaults to store.DefaultCluster.
	Cluster string
	// Bootstrap is the Kafka bootstrap.servers list. Required.
	Bootstrap string
	// ConsumerConfig holds extra librdkafka settings of the reader (security, tuning).
	ConsumerConfig kafka.ConfigMap
	// DeadLetterTopic is the service's own dead-letter topic, the one to reactivate. Required.
	DeadLetterTopic string
	// Topic and Sources are the intake's (Config.Topic, Config.Sources): a record is fed back
	// through the source of its original topic. At least one is required.
	Topic   string
	Sources []Source
	// BatchSize bounds the records stored in one transaction, and read between two progress
	// records. Defaults to DefaultReactivateBatchSize (500).
	BatchSize int
	// StaleAfter is how long a run may go without progress before a new start considers its
	// service gone and marks it INTERRUPTED. Defaults to DefaultReactivateStaleAfter (2m).
	StaleAfter time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// ReactivateRequest asks for a run over the dead-letter topic, from where the previous run
// stopped (the beginning of the topic for the first).
type ReactivateRequest struct {
	// Principal is who asked; required. Reason says why; optional. Both are audited.
	Principal string
	Reason    string
	// Limit bounds the records read (> 0) unless UpToNow.
	Limit int64
	// UpToNow reads up to the end of every partition as it is when the run starts.
	UpToNow bool
}

// Reactivator feeds the records of the service's own dead-letter topic back through the
// intake: after a fix (a schema registry that was down made events undecodable; a source
// configured later), the records that can now be stored become failures, and what still fails
// stays on the topic. Each run starts where the previous one stopped (positions kept in
// Postgres), is audited, and reports its progress through the store (redrive.Reactivation).
// One run per topic runs at a time across instances.
type Reactivator struct {
	cfg     ReactivatorConfig
	log     *slog.Logger
	sources map[string]*Source

	mu     sync.Mutex
	ctx    context.Context // runs end when it ends
	cancel context.CancelFunc
	runs   sync.WaitGroup
	closed bool
}

// NewReactivator returns a Reactivator for cfg, or an "invalid config" error.
func NewReactivator(cfg ReactivatorConfig) (*Reactivator, error) {
	if cfg.Codec == nil {
		codec, err := avro.NewCodec(avro.Config{})
		if err != nil {
			return nil, err
		}
		cfg.Codec = codec
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultReactivateBatchSize
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = DefaultReactivateStaleAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Cluster == "" {
		cfg.Cluster = store.DefaultCluster
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid config: "+format, args...)) }
	if cfg.Store == nil {
		bad("Store is required")
	}
	if cfg.NextAttempt == nil {
		bad("NextAttempt is required")
	}
	if cfg.Bootstrap == "" {
		bad("Bootstrap is required")
	}
	if cfg.DeadLetterTopic == "" {
		bad("DeadLetterTopic is required")
	}
	if err := store.ValidateClusterName(cfg.Cluster); err != nil {
		bad("Cluster %v", err)
	}
	if cfg.BatchSize < 0 || cfg.BatchSize > MaxBatchSize {
		bad("BatchSize %d must be between 1 and %d", cfg.BatchSize, MaxBatchSize)
	}
	if cfg.StaleAfter < 0 {
		bad("StaleAfter %s is negative", cfg.StaleAfter)
	}
	ic := Config{Topic: cfg.Topic, Sources: cfg.Sources}
	srcs := ic.sources()
	if len(srcs) == 0 {
		bad("Topic or Sources is required")
	}
	r := &Reactivator{cfg: cfg, log: cfg.Logger.With("component", "reactivator", "cluster", cfg.Cluster), sources: map[string]*Source{}}
	for _, s := range srcs {
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("invalid config: %w", err))
		}
		if s.Topic == cfg.DeadLetterTopic {
			bad("DeadLetterTopic %q is a source topic", s.Topic)
		}
		s.hashes = &traceHashes{}
		s.cluster = cfg.Cluster
		r.sources[s.Topic] = &s
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// NewReactivator returns a Reactivator of the intake's dead-letter topic that decodes the
// records as the intake's sources do, with its store, backoff, codec, brokers and consumer
// settings.
func (in *Intake) NewReactivator() (*Reactivator, error) {
	c := in.cfg
	return NewReactivator(ReactivatorConfig{
		Store: c.Store, NextAttempt: c.NextAttempt, Codec: c.Codec, Cluster: c.Cluster, Bootstrap: c.Bootstrap, ConsumerConfig: c.ConsumerConfig,
		DeadLetterTopic: c.DeadLetterTopic, Topic: c.Topic, Sources: c.Sources, BatchSize: min(c.BatchSize, DefaultReactivateBatchSize),
		Logger: c.Logger, Now: c.Now,
	})
}

// Start records a new run of the dead-letter topic and starts it in the background; it
// returns the run as started. It returns redrive.ErrReactivationRunning when a run of the topic
// is running (on any instance), and an error for a request without a principal or a limit.
func (r *Reactivator) Start(ctx context.Context, req ReactivateRequest) (*redrive.Reactivation, error) {
	if req.Principal == "" {
		return nil, errors.New("reactivate: a principal is required")
	}
	if !req.UpToNow && req.Limit <= 0 {
		return nil, fmt.Errorf("reactivate: limit %d: want a limit > 0, or up to now", req.Limit)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("reactivate: the reactivator is closed")
	}
	run, from, err := r.cfg.Store.StartReactivation(ctx, store.StartReactivationParams{
		Topic: r.cfg.DeadLetterTopic, Cluster: r.cfg.Cluster, Principal: req.Principal, Reason: req.Reason, Limit: req.Limit, UpToNow: req.UpToNow,
		StaleAfter: r.cfg.StaleAfter,
	})
	if err != nil {
		return nil, fmt.Errorf("reactivate: %w", err)
	}
	r.log.Info("reactivation started", "id", run.ID, "topic", run.Topic, "principal", run.Principal, "limit", req.Limit, "up_to_now", req.UpToNow)
	r.runs.Add(1)
	go func() {
		defer r.runs.Done()
		r.run(r.ctx, run, from)
	}()
	return run, nil
}

// Progress returns the run with id as the store has it, or redrive.ErrNotFound.
func (r *Reactivator) Progress(ctx context.Context, id int64) (*redrive.Reactivation, error) {
	return r.cfg.Store.ReactivationByID(ctx, id)
}

// Close interrupts the running runs (they end INTERRUPTED, their progress kept) and waits for
// them, or for ctx. Later Starts fail.
func (r *Reactivator) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() {
		r.runs.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runState is a run in progress.
type runState struct {
	run       *redrive.Reactivation
	left      int64           // records still to read; -1 without a limit
	end       map[int32]int64 // per partition, the offset where the run stops
	next      map[int32]int64 // per partition, the next offset to read
	remaining map[int32]bool  // partitions not yet read to their end
	lastEvent time.Time       // when the consumer last returned a record or an end of partition
}

// run reads the topic from the positions and ends the run in the store.
func (r *Reactivator) run(ctx context.Context, run *redrive.Reactivation, from map[int32]int64) {
	err := r.read(ctx, run, from)
	state, text := redrive.ReactivationDone, ""
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		r.log.Warn("reactivation was ended elsewhere (no progress for too long)", "id", run.ID)
		return
	case ctx.Err() != nil:
		state = redrive.ReactivationInterrupted
	case err != nil:
		state, text = redrive.ReactivationFailed, err.Error()
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	end, ferr := r.cfg.Store.FinishReactivation(fctx, run.ID, state, text)
	if ferr != nil {
		r.log.Error("cannot record the end of the reactivation", "id", run.ID, "error", ferr)
		return
	}
	r.log.Info("reactivation ended", "id", run.ID, "state", end.State, "read", end.Read, "reingested", end.Reingested,
		"duplicates", end.Duplicates, "still_failing", end.StillFailing, "error", text)
}

func (r *Reactivator) read(ctx context.Context, run *redrive.Reactivation, from map[int32]int64) error {
	topic := r.cfg.DeadLetterTopic
	cm := kafka.ConfigMap{
		"client.id":                "redrive-reactivator",
		"auto.offset.reset":        "earliest",
		"enable.partition.eof":     true,
		"go.logs.channel.enable":   true,
		"enable.auto.offset.store": false,
	}
	for k, v := range r.cfg.ConsumerConfig {
		cm[k] = v
	}
	cm["bootstrap.servers"] = r.cfg.Bootstrap
	cm["group.id"] = fmt.Sprintf("redrive-reactivate-%d", run.ID) // never joins: partitions are assigned
	cm["enable.auto.commit"] = false
	cons, err := kafka.NewConsumer(&cm)
	if err != nil {
		return fmt.Errorf("new consumer: %w", err)
	}
	stopLogs := kafkalog.Forward(r.log, "reactivator", cons.Logs())
	defer func() {
		if err := kafkalog.CloseConsumer(cons, consumerCloseTimeout); errors.Is(err, kafkalog.ErrCloseTimeout) {
			r.log.Error("reactivation: librdkafka did not finish closing the consumer; going on without it", "error", err)
		} else {
			stopLogs()
		}
	}()
	md, err := cons.GetMetadata(&topic, false, 10000)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, err)
	}
	st := &runState{run: run, left: -1, end: map[int32]int64{}, next: map[int32]int64{}, remaining: map[int32]bool{}}
	if run.Limit != nil {
		st.left = *run.Limit
	}
	var assign []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		low, high, err := cons.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			return fmt.Errorf("watermarks of %s/%d: %w", topic, p.ID, err)
		}
		start, ok := from[p.ID]
		if !ok || start < low {
			start = low // never read, or its records were deleted since
		}
		st.end[p.ID], st.next[p.ID] = high, start
		if start < high {
			st.remaining[p.ID] = true
			assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.Offset(start)})
		}
	}
	if len(assign) == 0 {
		return nil
	}
	if err := cons.Assign(assign); err != nil {
		return fmt.Errorf("assign: %w", err)
	}
	st.lastEvent = time.Now()
	for len(st.remaining) > 0 && st.left != 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if quiet := time.Since(st.lastEvent); quiet > r.cfg.StaleAfter/2 {
			return fmt.Errorf("no record of %s for %s although %d partitions are not read to their end: are the brokers reachable?",
				topic, quiet.Round(time.Second), len(st.remaining))
		}
		batch := r.poll(ctx, cons, st)
		if len(batch) == 0 {
			continue
		}
		if err := r.feed(ctx, st, batch); err != nil {
			return err
		}
	}
	return nil
}

// poll reads up to BatchSize records (and the run's limit) below the partitions' ends.
func (r *Reactivator) poll(ctx context.Context, cons *kafka.Consumer, st *runState) []*kafka.Message {
	want := r.cfg.BatchSize
	if st.left >= 0 && int64(want) > st.left {
		want = int(st.left)
	}
	var out []*kafka.Message
	idle := 0
	for len(out) < want && len(st.remaining) > 0 && ctx.Err() == nil {
		switch ev := cons.Poll(100).(type) {
		case *kafka.Message:
			st.lastEvent = time.Now()
			p, o := ev.TopicPartition.Partition, int64(ev.TopicPartition.Offset)
			if ev.TopicPartition.Error != nil || !st.remaining[p] {
				continue
			}
			if o >= st.end[p] {
				delete(st.remaining, p)
				continue
			}
			out = append(out, ev)
			if o+1 >= st.end[p] {
				delete(st.remaining, p)
			}
		case kafka.PartitionEOF:
			st.lastEvent = time.Now()
			delete(st.remaining, ev.Partition)
		case kafka.Error:
			r.log.Warn("reactivation consumer error", "error", ev)
		case nil:
			if idle++; idle > 2 && len(out) > 0 || time.Since(st.lastEvent) > r.cfg.StaleAfter/2 {
				return out
			}
		}
	}
	return out
}

// feed stores a batch of dead-letter records that now make sense, counts the others as still
// failing, and records the step.
func (r *Reactivator) feed(ctx context.Context, st *runState, batch []*kafka.Message) error {
	step := redrive.ReactivationStep{ID: st.run.ID, Positions: map[int32]int64{}}
	var good []store.Prepared
	for _, m := range batch {
		rec, err := r.refeed(m)
		if err == nil && rec.transient {
			// The registry cannot be asked: stop before this record, to read it again later.
			if err := r.store(ctx, good, &step); err != nil {
				return err
			}
			if err := r.cfg.Store.RecordReactivationStep(ctx, step); err != nil {
				return err
			}
			return fmt.Errorf("record %s/%d/%d: %w", *m.TopicPartition.Topic, m.TopicPartition.Partition, m.TopicPartition.Offset, rec.err)
		}
		step.Read++
		step.Positions[m.TopicPartition.Partition] = int64(m.TopicPartition.Offset) + 1
		if err != nil || rec.bad() {
			if err == nil {
				err = rec.err
			}
			step.StillFailing++
			r.log.Debug("dead-letter record still fails", "partition", m.TopicPartition.Partition, "offset", int64(m.TopicPartition.Offset), "error", err)
			continue
		}
		good = append(good, rec.prep)
	}
	if err := r.store(ctx, good, &step); err != nil {
		return err
	}
	if st.left > 0 {
		st.left -= step.Read
	}
	return r.cfg.Store.RecordReactivationStep(ctx, step)
}

// store ingests the prepared failures, retrying while Postgres fails (a few times), and one by
// one when Postgres refuses the data of the batch.
func (r *Reactivator) store(ctx context.Context, good []store.Prepared, step *redrive.ReactivationStep) error {
	if len(good) == 0 {
		return nil
	}
	backoff := &backoff{next: DefaultRetryMin, max: DefaultRetryMax}
	for attempt := 1; ; attempt++ {
		res, err := r.cfg.Store.IngestPrepared(ctx, good, r.cfg.NextAttempt)
		if err == nil {
			step.Reingested += int64(res.Inserted)
			step.Duplicates += int64(res.Duplicates)
			return nil
		}
		if errors.Is(err, redrive.ErrBadData) {
			if len(good) == 1 {
				step.StillFailing++
				return nil
			}
			for _, p := range good {
				if err := r.store(ctx, []store.Prepared{p}, step); err != nil {
					return err
				}
			}
			return nil
		}
		if attempt == 10 || ctx.Err() != nil {
			return fmt.Errorf("store: %w", err)
		}
		r.log.Warn("reactivation cannot write to postgres; retrying", "error", err)
		if err := backoff.wait(ctx); err != nil {
			return err
		}
	}
}

// refeed turns a record of the dead-letter topic back into the record that was dead-lettered
// and decodes it as its source does now.
func (r *Reactivator) refeed(m *kafka.Message) (*record, error) {
	orig, err := unwrapDeadLetter(r.cfg.Codec, r.cfg.DeadLetterTopic, m.Value)
	if err != nil {
		return nil, err
	}
	topic := deref(orig.TopicPartition.Topic)
	src := r.sources[topic]
	if src == nil {
		return nil, fmt.Errorf("topic %q of the dead-lettered record is not a source of this service", topic)
	}
	return decodeSource(src, r.cfg.Codec, orig, r.cfg.Now()), nil
}

// unwrapDeadLetter returns the record that a dead-letter event (wrap) carries: its topic,
// partition and offset, key, value (a null value when the event marks it so; an empty one for
// EMPTY_CONTENT) and exact headers. A cut original gives ErrTruncated.
func unwrapDeadLetter(codec *avro.Codec, topic string, value []byte) (*kafka.Message, error) {
	e, err := codec.DecodeEvent(topic, value)
	if err != nil {
		return nil, fmt.Errorf("not a dead-letter event: %w", err)
	}
	if d := e.Payload.ErrorDescription; d != nil && strings.Contains(*d, truncatedMarker) {
		return nil, ErrTruncated
	}
	md := e.Payload.FailedMessageMetadata
	hs, err := md.OriginalHeaders()
	if err != nil {
		return nil, fmt.Errorf("dead-letter event headers: %w", err)
	}
	v := e.Payload.OriginalMessage
	if md != nil {
		if n, ok := md.Headers[avro.ValueNullEntry]; ok && string(n) == "true" {
			v = nil
		}
	}
	if v != nil && string(v) == avro.EmptyContent {
		v = []byte{}
	}
	ref := e.References.Message
	t := ref.TopicName
	m := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &t, Partition: ref.Partition, Offset: kafka.Offset(ref.Offset)},
		Key:            e.Payload.OriginalKey,
		Value:          v,
		Timestamp:      e.Identity.Created,
		TimestampType:  kafka.TimestampCreateTime,
	}
	for _, h := range hs {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Name, Value: h.Value})
	}
	return m, nil
}

// Cluster returns the name of the Kafka cluster whose dead-letter topic the reactivator reads.
func (r *Reactivator) Cluster() string { return r.cfg.Cluster }
