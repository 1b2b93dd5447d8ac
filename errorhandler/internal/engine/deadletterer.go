package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
)

// Producer is an adapter's MPFE producer (acks=all, idempotent).
type Producer interface {
	// Produce hands one MPFE to the client, to the error topic. key and value stay unchanged
	// until the outcome is reported (the client may send them without a copy). When it
	// returns nil, the outcome is reported exactly once to the
	// report function the Producer was built with; an error means the attempt failed.
	Produce(j *Job, key, value []byte) error
	// Purge drops the MPFEs not yet acknowledged; each is reported as failed.
	Purge()
	// Close flushes for at most timeout and closes the client.
	Close(timeout time.Duration)
}

// NewProducerFunc builds a Producer that reports every outcome to report.
type NewProducerFunc func(report func(j *Job, err error)) (Producer, error)

// errCancelled finishes a job that its owner gave up (a revoked partition).
var errCancelled = errors.New("dead-letter cancelled")

// DeadLetterer publishes MPFEs for failed records, asynchronously: Publish returns at once and
// the Delivery reports when the error topic acknowledged the event (acks=all), which is when
// the failed record's offset may be committed. A failed attempt is retried with capped
// exponential backoff, never given up on its own. It is safe for concurrent use.
type DeadLetterer struct {
	cfg   errorhandler.DeadLetterConfig
	codec *avro.Codec
	met   *Metrics
	log   *slog.Logger

	headMu  sync.Mutex
	evHead  []byte
	keyHead []byte

	prod   Producer
	tracer trace.Tracer // the application's, or OpenTelemetry's global one

	produced prometheus.Counter
	throttle *throttle

	mu        sync.Mutex
	jobs      *Job // the jobs not finished, linked through Job.next
	njobs     int
	retrying  int
	closing   bool
	idle      chan struct{} // closed when closing and no job is left
	lastErr   string
	lastErrAt time.Time
}

// NewDeadLetterer validates cfg and starts the MPFE producer built by newProducer.
func NewDeadLetterer(cfg errorhandler.DeadLetterConfig, newProducer NewProducerFunc) (*DeadLetterer, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	met, err := NewMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	codec, err := avro.NewCodec(avro.Config{Registry: cfg.Registry})
	if err != nil {
		return nil, fmt.Errorf("new codec: %w", err)
	}
	d := &DeadLetterer{
		cfg:      cfg,
		codec:    codec,
		met:      met,
		log:      cfg.Logger.With("component", "redrive.errorhandler.deadletter", "error_topic", cfg.ErrorTopic),
		throttle: newThrottle(5*time.Second, cfg.Clock),
		idle:     make(chan struct{}),
		tracer:   newTracer(cfg),
	}
	d.produced = met.produced.WithLabelValues(cfg.ErrorTopic)
	p, err := newProducer(d.report)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	d.prod = p
	return d, nil
}

// Config returns the validated configuration.
func (d *DeadLetterer) Config() errorhandler.DeadLetterConfig { return d.cfg }

// Logger returns the dead-letterer's logger.
func (d *DeadLetterer) Logger() *slog.Logger { return d.log }

// Throttle reports whether a log line for key may be written now, and how many were
// suppressed since the last one that was.
func (d *DeadLetterer) Throttle(key string) (bool, int) { return d.throttle.allow(key) }

// submit starts j's first attempt, or finishes it with ErrClosed.
func (d *DeadLetterer) submit(j *Job) {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		j.finished.Store(true)
		j.sink.jobDone(j, errorhandler.ErrClosed)
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
	d.startSpan(j)
	d.attempt(j)
}

// cancel stops retrying j; err is what its Delivery reports. An attempt already handed to the
// producer may still be delivered, and then counts as delivered.
func (d *DeadLetterer) cancel(j *Job, err error) {
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

func (d *DeadLetterer) giveUpErr(j *Job) error {
	err := errCancelled
	if p := j.cancelErr.Load(); p != nil {
		err = *p
	}
	if j.lastErr != nil {
		return fmt.Errorf("dead-letter %s[%d]@%d not acknowledged: %w", j.msg.Topic, j.msg.Partition, j.msg.Offset, errors.Join(err, j.lastErr))
	}
	return fmt.Errorf("dead-letter %s[%d]@%d not acknowledged: %w", j.msg.Topic, j.msg.Partition, j.msg.Offset, err)
}

// attempt encodes j and hands it to the producer.
func (d *DeadLetterer) attempt(j *Job) {
	if j.cancelErr.Load() != nil {
		d.finish(j, d.giveUpErr(j))
		return
	}
	// The event is encoded once, into a buffer of its own that the producer may send as it
	// is; a retry sends the same bytes. Encoding fails only when the framing cannot be
	// known yet (a schema registry that does not answer): then the next attempt tries again.
	if !j.encoded {
		// A recycled job brings its earlier buffer.
		b := j.buf[:0]
		if hint := encodedSizeHint(j); cap(b) < hint {
			b = make([]byte, 0, hint)
		}
		buf, keyAt, err := d.encode(b, j)
		if err != nil {
			d.retry(j, err)
			return
		}
		j.buf, j.keyAt, j.encoded = buf, keyAt, true
	}
	buf, keyAt := j.buf, j.keyAt
	// Once Produce succeeded, j belongs to the producer's report: nothing below touches it.
	if err := d.prod.Produce(j, buf[keyAt:], buf[:keyAt:keyAt]); err != nil {
		d.retry(j, fmt.Errorf("produce: %w", err))
	}
}

// report is the producer's report of j's attempt: nil when the error topic acknowledged it.
func (d *DeadLetterer) report(j *Job, err error) {
	if err != nil {
		d.retry(j, fmt.Errorf("delivery: %w", err))
		return
	}
	d.produced.Inc()
	d.finish(j, nil)
}

// encode appends j's framed event and then its framed key to b; the key starts at keyAt.
func (d *DeadLetterer) encode(b []byte, j *Job) (out []byte, keyAt int, err error) {
	evHead, keyHead, err := d.heads()
	if err != nil {
		return nil, 0, err
	}
	b, err = appendEvent(append(b, evHead...), &j.ev, &j.msg.Headers)
	if err != nil {
		return nil, 0, err
	}
	if limit := d.codec.MaxSize(); len(b) > limit {
		return nil, 0, fmt.Errorf("encode event: %w: %d bytes, limit %d", avro.ErrTooLarge, len(b), limit)
	}
	keyAt = len(b)
	b = avro.AppendKey(append(b, keyHead...), avro.Key{Key: j.key})
	return b, keyAt, nil
}

// encodedSizeHint returns a capacity that holds j's framed event and key in most cases: its
// variable parts plus room for the fixed fields, ids and length prefixes.
func encodedSizeHint(j *Job) int {
	p := &j.ev.Payload
	n := 512 + len(p.OriginalMessage) + len(p.OriginalKey) + len(p.ErrorMessage) + len(j.key) +
		len(j.ev.References.Message.TopicName)
	if p.StackTrace != nil {
		n += len(*p.StackTrace)
	}
	for _, h := range j.msg.Headers {
		n += 2 * (len(h.Key) + len(h.Value) + 4) // the map entry and the ordered list
	}
	return n
}

// heads returns the framing prefixes of events and keys on the error topic, as the avro codec
// decides them (registering the schemas when a registry is configured).
func (d *DeadLetterer) heads() (ev, key []byte, err error) {
	d.headMu.Lock()
	defer d.headMu.Unlock()
	if d.evHead != nil {
		return d.evHead, d.keyHead, nil
	}
	eh, err := d.codec.EventFraming(d.cfg.ErrorTopic)
	if err != nil {
		return nil, nil, fmt.Errorf("frame event: %w", err)
	}
	kh, err := d.codec.KeyFraming(d.cfg.ErrorTopic)
	if err != nil {
		return nil, nil, fmt.Errorf("frame key: %w", err)
	}
	d.evHead, d.keyHead = eh, kh
	return d.evHead, d.keyHead, nil
}

// retry records a failed attempt and schedules the next one with backoff.
func (d *DeadLetterer) retry(j *Job, err error) {
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
			"topic", j.msg.Topic, "partition", j.msg.Partition, "offset", j.msg.Offset,
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

func (d *DeadLetterer) finish(j *Job, err error) {
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
	endSpan(j, err)
	j.sink.jobDone(j, err)
}

// Health returns the producer's state: Retrying > 0 means the error topic cannot be written.
func (d *DeadLetterer) Health() errorhandler.DeadLetterHealth {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := errorhandler.DeadLetterHealth{ErrorTopic: d.cfg.ErrorTopic, InFlight: d.njobs, Retrying: d.retrying, LastError: d.lastErr}
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
		left := make([]*Job, 0, d.njobs)
		for j := d.jobs; j != nil; j = j.next {
			left = append(left, j)
		}
		d.mu.Unlock()
		err = fmt.Errorf("close dead-letterer: %d MPFEs not acknowledged: %w", len(left), ctx.Err())
		for _, j := range left {
			d.cancel(j, errorhandler.ErrClosed)
		}
		d.prod.Purge()
		t := time.NewTimer(5 * time.Second)
		select {
		case <-d.idle:
		case <-t.C:
		}
		t.Stop()
	}
	d.prod.Close(time.Second)
	return err
}
