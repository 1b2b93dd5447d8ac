package errorhandler

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/kafkalog"
)

// ErrClosed is returned for MPFEs submitted to a DeadLetterer that is closing.
var ErrClosed = errors.New("dead-letterer is closed")

// errCancelled finishes a job that its owner gave up (a revoked partition).
var errCancelled = errors.New("dead-letter cancelled")

// queueFullWait bounds how long one produce call waits for space in the producer's queue
// before the attempt counts as failed and is retried with backoff.
const queueFullWait = 5 * time.Second

// DeadLetterer publishes MPFEs for failed records, asynchronously: Publish returns at once and
// the Delivery reports when the error topic acknowledged the event (acks=all), which is when
// the failed record's offset may be committed. A failed attempt is retried with capped
// exponential backoff, never given up on its own. It is safe for concurrent use.
type DeadLetterer struct {
	cfg   DeadLetterConfig
	codec *avro.Codec
	met   *metrics
	log   *slog.Logger
	ids   io.Reader

	headMu  sync.Mutex
	evHead  []byte
	keyHead []byte

	prodMu sync.RWMutex
	prod   *kafka.Producer
	prodWG sync.WaitGroup // event loops

	produced  prometheus.Counter
	delivered chan struct{} // notified on each delivery report, for queue-full waits
	throttle  *throttle

	mu        sync.Mutex
	jobs      *job // the jobs not finished, linked through job.next
	njobs     int
	retrying  int
	closing   bool
	idle      chan struct{} // closed when closing and no job is left
	lastErr   string
	lastErrAt time.Time
}

// NewDeadLetterer validates cfg and starts the MPFE producer.
func NewDeadLetterer(cfg DeadLetterConfig) (*DeadLetterer, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	met, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	codec, err := avro.NewCodec(avro.Config{Registry: cfg.Registry})
	if err != nil {
		return nil, fmt.Errorf("new codec: %w", err)
	}
	d := &DeadLetterer{
		cfg:       cfg,
		codec:     codec,
		met:       met,
		log:       cfg.Logger.With("component", "redrive.errorhandler.deadletter", "error_topic", cfg.ErrorTopic),
		ids:       &lockedReader{r: bufio.NewReaderSize(crand.Reader, 4096)},
		delivered: make(chan struct{}, 1),
		throttle:  newThrottle(5*time.Second, cfg.Clock),
		idle:      make(chan struct{}),
	}
	d.produced = met.produced.WithLabelValues(cfg.ErrorTopic)
	p, err := d.newProducer()
	if err != nil {
		return nil, err
	}
	d.prod = p
	return d, nil
}

func (d *DeadLetterer) newProducer() (*kafka.Producer, error) {
	cfg := d.cfg.producerConfig()
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	kafkalog.Forward(d.log, "dead-letter producer", p.Logs())
	d.prodWG.Add(1)
	go d.eventLoop(p)
	return p, nil
}

func (d *DeadLetterer) classify(phase Phase, err error) failure {
	def := DefaultClassification(phase, err)
	c := def
	if d.cfg.Classifier != nil {
		c = d.cfg.Classifier(phase, err, def).orDefault(def)
	}
	return failure{phase: phase, err: err, class: c}
}

// submit starts j's first attempt, or finishes it with ErrClosed.
func (d *DeadLetterer) submit(j *job) {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		j.finished.Store(true)
		j.sink.jobDone(j, ErrClosed)
		return
	}
	j.next = d.jobs
	if d.jobs != nil {
		d.jobs.prev = j
	}
	d.jobs = j
	d.njobs++
	d.mu.Unlock()
	d.met.inFlight.Inc()
	d.attempt(j)
}

// cancel stops retrying j; err is what its Delivery reports. An attempt already handed to the
// producer may still be delivered, and then counts as delivered.
func (d *DeadLetterer) cancel(j *job, err error) {
	if err == nil {
		err = errCancelled
	}
	j.cancelErr.CompareAndSwap(nil, &err)
	d.mu.Lock()
	waiting := j.timer != nil && j.timer.Stop()
	d.mu.Unlock()
	if waiting {
		d.finish(j, d.giveUpErr(j))
	}
}

func (d *DeadLetterer) giveUpErr(j *job) error {
	err := errCancelled
	if p := j.cancelErr.Load(); p != nil {
		err = *p
	}
	if j.lastErr != nil {
		return fmt.Errorf("dead-letter %s[%d]@%d not acknowledged: %w", topicOf(j.msg), j.msg.TopicPartition.Partition, j.msg.TopicPartition.Offset, errors.Join(err, j.lastErr))
	}
	return fmt.Errorf("dead-letter %s[%d]@%d not acknowledged: %w", topicOf(j.msg), j.msg.TopicPartition.Partition, j.msg.TopicPartition.Offset, err)
}

// attempt encodes j and hands it to the producer.
func (d *DeadLetterer) attempt(j *job) {
	if j.cancelErr.Load() != nil {
		d.finish(j, d.giveUpErr(j))
		return
	}
	// The producer copies key and value (RD_KAFKA_MSG_F_COPY), so the encoding buffer is reused
	// as soon as Produce returns; a retry encodes the same event again.
	bp := encodeBufs.Get().(*[]byte)
	defer putEncodeBuf(bp)
	buf, keyAt, err := d.encode((*bp)[:0], j)
	if err != nil {
		d.retry(j, err)
		return
	}
	*bp = buf
	// Once Produce succeeded, j belongs to the event loop: nothing below touches it again. The
	// stale Key and Value are overwritten before the next attempt's Produce reads them.
	j.out.Value, j.out.Key = buf[:keyAt:keyAt], buf[keyAt:]
	deadline := time.Time{}
	for {
		d.prodMu.RLock()
		p := d.prod
		err := p.Produce(&j.out, nil)
		d.prodMu.RUnlock()
		if err == nil {
			return
		}
		var kerr kafka.Error
		if errors.As(err, &kerr) && kerr.Code() == kafka.ErrQueueFull {
			if deadline.IsZero() {
				deadline = time.Now().Add(queueFullWait)
			}
			if time.Now().Before(deadline) {
				d.waitDelivery()
				continue
			}
		}
		if errors.As(err, &kerr) && kerr.IsFatal() {
			d.replaceProducer(p)
		}
		d.retry(j, fmt.Errorf("produce: %w", err))
		return
	}
}

// waitDelivery waits for the next delivery report (space in the producer's queue), at most
// 50ms.
func (d *DeadLetterer) waitDelivery() {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-d.delivered:
	case <-t.C:
	}
}

// encode appends j's framed event and then its framed key to b; the key starts at keyAt.
func (d *DeadLetterer) encode(b []byte, j *job) (out []byte, keyAt int, err error) {
	evHead, keyHead, err := d.heads()
	if err != nil {
		return nil, 0, err
	}
	b, err = appendEvent(append(b, evHead...), &j.ev, &j.msg.Headers)
	if err != nil {
		return nil, 0, err
	}
	if len(b) > avro.DefaultMaxSize {
		return nil, 0, fmt.Errorf("encode event: %w: %d bytes, limit %d", avro.ErrTooLarge, len(b), avro.DefaultMaxSize)
	}
	keyAt = len(b)
	b = avro.AppendKey(append(b, keyHead...), avro.Key{Key: j.key})
	return b, keyAt, nil
}

// heads returns the framing prefixes of events and keys on the error topic, as the avro codec
// writes them (registering the schemas when a registry is configured).
func (d *DeadLetterer) heads() (ev, key []byte, err error) {
	d.headMu.Lock()
	defer d.headMu.Unlock()
	if d.evHead != nil {
		return d.evHead, d.keyHead, nil
	}
	probe := &avro.Event{
		Identity:   avro.Identity{Created: time.UnixMilli(0)},
		References: avro.References{ErrorType: avro.ErrorTypeReference{Temporality: avro.Unknown}},
	}
	eb, err := d.codec.EncodeEvent(d.cfg.ErrorTopic, probe)
	if err != nil {
		return nil, nil, fmt.Errorf("frame event: %w", err)
	}
	kb, err := d.codec.EncodeKey(d.cfg.ErrorTopic, avro.Key{})
	if err != nil {
		return nil, nil, fmt.Errorf("frame key: %w", err)
	}
	d.evHead, d.keyHead = eb[:headLen(eb)], kb[:headLen(kb)]
	return d.evHead, d.keyHead, nil
}

// headLen is the length of the framing prefix: 10 bytes for single-object encoding, 5 for the
// Confluent wire format.
func headLen(b []byte) int {
	if b[0] == 0xC3 {
		return 10
	}
	return 5
}

// retry records a failed attempt and schedules the next one with backoff.
func (d *DeadLetterer) retry(j *job, err error) {
	j.attempts++
	j.lastErr = err
	d.met.produceFailures.WithLabelValues(d.cfg.ErrorTopic).Inc()
	now := d.cfg.Clock()
	d.mu.Lock()
	d.lastErr, d.lastErrAt = err.Error(), now
	if !j.failing {
		j.failing = true
		d.retrying++
	}
	d.mu.Unlock()
	if ok, n := d.throttle.allow("produce:" + d.cfg.ErrorTopic); ok {
		d.log.Warn("cannot write the error topic; retrying with backoff, the partition waits uncommitted",
			"topic", topicOf(j.msg), "partition", j.msg.TopicPartition.Partition, "offset", int64(j.msg.TopicPartition.Offset),
			"attempt", j.attempts, "error", err, "suppressed", n)
	}
	j.sink.jobFailing(j, err)
	if j.cancelErr.Load() != nil {
		d.finish(j, d.giveUpErr(j))
		return
	}
	delay := d.backoff(j.attempts)
	d.mu.Lock()
	j.timer = time.AfterFunc(delay, func() {
		d.mu.Lock()
		j.timer = nil
		d.mu.Unlock()
		d.attempt(j)
	})
	d.mu.Unlock()
}

// backoff returns the delay before attempt n+1: RetryBackoff doubled per attempt, capped at
// MaxRetryBackoff, with ±20% jitter.
func (d *DeadLetterer) backoff(n int) time.Duration {
	delay := d.cfg.RetryBackoff
	for i := 1; i < n && delay < d.cfg.MaxRetryBackoff; i++ {
		delay *= 2
	}
	delay = min(delay, d.cfg.MaxRetryBackoff)
	return time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
}

func (d *DeadLetterer) finish(j *job, err error) {
	if !j.finished.CompareAndSwap(false, true) {
		return
	}
	d.mu.Lock()
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		d.jobs = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	}
	j.prev, j.next = nil, nil
	d.njobs--
	if j.failing {
		j.failing = false
		d.retrying--
	}
	if d.closing && d.njobs == 0 {
		select {
		case <-d.idle:
		default:
			close(d.idle)
		}
	}
	d.mu.Unlock()
	d.met.inFlight.Dec()
	j.sink.jobDone(j, err)
}

// eventLoop serves p's delivery reports and errors until p is closed.
func (d *DeadLetterer) eventLoop(p *kafka.Producer) {
	defer d.prodWG.Done()
	for ev := range p.Events() {
		switch e := ev.(type) {
		case *kafka.Message:
			j, ok := e.Opaque.(*job)
			if !ok {
				continue
			}
			select {
			case d.delivered <- struct{}{}:
			default:
			}
			if err := e.TopicPartition.Error; err != nil {
				var kerr kafka.Error
				if errors.As(err, &kerr) && kerr.IsFatal() {
					go d.replaceProducer(p)
				}
				d.retry(j, fmt.Errorf("delivery: %w", err))
				continue
			}
			d.produced.Inc()
			d.finish(j, nil)
		case kafka.Error:
			if e.IsFatal() {
				d.log.Error("dead-letter producer failed fatally; replacing it", "error", e)
				go d.replaceProducer(p)
				continue
			}
			if ok, n := d.throttle.allow("producer-error:" + d.cfg.ErrorTopic); ok {
				d.log.Warn("dead-letter producer error", "error", e, "suppressed", n)
			}
		}
	}
}

// replaceProducer swaps a producer that failed fatally (an idempotent producer can) for a new
// one; the old one's messages come back as failed deliveries and are retried on the new one.
func (d *DeadLetterer) replaceProducer(old *kafka.Producer) {
	d.prodMu.Lock()
	if d.prod != old {
		d.prodMu.Unlock()
		return
	}
	p, err := d.newProducer()
	if err != nil {
		d.prodMu.Unlock()
		d.log.Error("cannot replace the dead-letter producer", "error", err)
		return
	}
	d.prod = p
	d.prodMu.Unlock()
	_ = old.Purge(kafka.PurgeQueue | kafka.PurgeInFlight)
	go func() {
		// Purged messages report through Events (served by old's event loop); then close.
		old.Flush(10000)
		old.Close()
	}()
}

// DeadLetterHealth describes the dead-letter producer.
type DeadLetterHealth struct {
	// ErrorTopic is where MPFEs go.
	ErrorTopic string `json:"error_topic"`
	// InFlight counts MPFEs not yet acknowledged.
	InFlight int `json:"in_flight"`
	// Retrying counts MPFEs whose last attempt failed.
	Retrying int `json:"retrying"`
	// LastError is the last produce error and when it happened.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// Health returns the producer's state: Retrying > 0 means the error topic cannot be written.
func (d *DeadLetterer) Health() DeadLetterHealth {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := DeadLetterHealth{ErrorTopic: d.cfg.ErrorTopic, InFlight: d.njobs, Retrying: d.retrying, LastError: d.lastErr}
	if !d.lastErrAt.IsZero() {
		at := d.lastErrAt
		h.LastErrorAt = &at
	}
	return h
}

// Close waits until every MPFE was acknowledged or ctx ends, then gives up the rest (their
// Deliveries report an error, so their records are not committed) and closes the producer.
// It returns an error when MPFEs were given up.
func (d *DeadLetterer) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.closing {
		d.closing = true
		if d.njobs == 0 {
			close(d.idle)
		}
	}
	d.mu.Unlock()
	var err error
	select {
	case <-d.idle:
	case <-ctx.Done():
		d.mu.Lock()
		left := make([]*job, 0, d.njobs)
		for j := d.jobs; j != nil; j = j.next {
			left = append(left, j)
		}
		d.mu.Unlock()
		err = fmt.Errorf("close dead-letterer: %d MPFEs not acknowledged: %w", len(left), ctx.Err())
		for _, j := range left {
			d.cancel(j, ErrClosed)
		}
		d.prodMu.RLock()
		_ = d.prod.Purge(kafka.PurgeQueue | kafka.PurgeInFlight)
		d.prodMu.RUnlock()
		t := time.NewTimer(5 * time.Second)
		select {
		case <-d.idle:
		case <-t.C:
		}
		t.Stop()
	}
	d.prodMu.Lock()
	p := d.prod
	d.prodMu.Unlock()
	p.Flush(1000)
	p.Close()
	d.prodWG.Wait()
	return err
}

// lockedReader serializes reads of a buffered random source.
type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}

func topicOf(m *kafka.Message) string {
	if m.TopicPartition.Topic == nil {
		return ""
	}
	return *m.TopicPartition.Topic
}
