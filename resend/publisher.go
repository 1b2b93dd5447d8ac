package resend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/kafkalog"
	"github.com/redrive/redrive/store"
)

// ErrClosed means the resender was shut down: Run returned.
var ErrClosed = redrive.ErrClosed

// errNoReport means the producer gave no delivery report in time; the record may still arrive.
var errNoReport = errors.New("no delivery report within the send timeout")

// reportGrace is added to the send timeout when waiting for delivery reports: librdkafka
// reports every message within message.timeout.ms, plus its own scheduling slack.
const reportGrace = 5 * time.Second

// publisher produces stored originals to their topics with an idempotent producer (acks=all)
// and waits for the acknowledgements. When the producer raises a fatal error (an idempotence
// violation) the next batch replaces it.
type publisher struct {
	config       kafka.ConfigMap
	service      string
	partitioning Partitioning
	sendTimeout  time.Duration
	log          *slog.Logger
	tracer       *resendTracer // nil: tracing off

	mu       sync.RWMutex // read-held while a batch sends; write-held to replace or close
	producer *kafka.Producer
	drained  chan struct{} // closed when the producer's Events channel is drained
	closed   bool
}

func newPublisher(cfg Config) (*publisher, error) {
	p := &publisher{
		config:       cfg.producerConfig(),
		service:      cfg.ServiceName,
		partitioning: cfg.Partitioning,
		sendTimeout:  cfg.SendTimeout,
		log:          cfg.Logger,
		tracer:       newResendTracer(cfg.TracerProvider),
	}
	if err := p.open(); err != nil {
		return nil, err
	}
	return p, nil
}

// open creates the producer and starts draining its Events channel. Call with mu held or
// before the publisher is shared.
func (p *publisher) open() error {
	cfg := make(kafka.ConfigMap, len(p.config))
	for k, v := range p.config {
		cfg[k] = v
	}
	prod, err := kafka.NewProducer(&cfg)
	if err != nil {
		return fmt.Errorf("new resend producer: %w", err)
	}
	kafkalog.Forward(p.log, "resend producer", prod.Logs())
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		// Delivery reports go to per-batch channels; what comes here are client errors.
		for ev := range prod.Events() {
			if e, ok := ev.(kafka.Error); ok {
				level := slog.LevelWarn
				if e.IsFatal() {
					level = slog.LevelError
				}
				p.log.Log(context.Background(), level, "resend producer error", "error", e, "code", e.Code(), "fatal", e.IsFatal())
			}
		}
	}()
	p.producer, p.drained = prod, drained
	return nil
}

// shut flushes and closes the current producer. Call with mu write-held.
func (p *publisher) shut(timeout time.Duration) {
	if p.producer == nil {
		return
	}
	if left := p.producer.Flush(int(timeout.Milliseconds())); left > 0 {
		p.log.Warn("resend producer closed with records unacknowledged", "records", left)
	}
	p.producer.Close()
	<-p.drained
	p.producer = nil
}

// close flushes and closes the producer; later sends fail with redrive.ErrClosed.
func (p *publisher) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.shut(p.sendTimeout)
}

// renew replaces the producer when it raised a fatal error.
func (p *publisher) renew() {
	p.mu.RLock()
	fatal := !p.closed && p.producer != nil && p.producer.GetFatalError() != nil
	p.mu.RUnlock()
	if !fatal {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.producer == nil {
		return
	}
	ferr := p.producer.GetFatalError()
	if ferr == nil {
		return // another batch renewed it
	}
	p.log.Error("resend producer failed fatally: replacing it", "error", ferr)
	p.shut(time.Second)
	if err := p.open(); err != nil {
		p.log.Error("resend producer could not be replaced", "error", err)
	}
}

// send produces one record per item and waits for every acknowledgement. It returns one error
// per item, nil for a record the broker acknowledged. It does not give up early when a context
// ends: a started batch finishes within the send timeout. ctx gives the records' spans their
// parent: the span of the API request or job batch that asked for the resend, none for the
// scheduler's own (rootContext).
func (p *publisher) send(ctx context.Context, items []store.ResendItem) []error {
	errs := make([]error, len(items))
	if len(items) == 0 {
		return errs
	}
	p.renew()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed || p.producer == nil {
		for i := range errs {
			errs[i] = redrive.ErrClosed
		}
		return errs
	}
	prod := p.producer
	spans := p.tracer.batch(len(items))
	defer spans.endRest(errs)

	reports := make(chan kafka.Event, len(items)) // never blocks the producer's poller
	done := make([]bool, len(items))
	pending := 0
	report := func(ev kafka.Event) {
		m, ok := ev.(*kafka.Message)
		if !ok {
			return
		}
		i, ok := m.Opaque.(int)
		if !ok || i < 0 || i >= len(items) || done[i] {
			return
		}
		done[i] = true
		pending--
		if err := m.TopicPartition.Error; err != nil {
			errs[i] = fmt.Errorf("delivery: %w", err)
		}
		spans.end(i, errs[i])
	}

	queueDeadline := time.Now().Add(p.sendTimeout)
	for i := range items {
		msg := p.message(&items[i], i)
		spans.start(ctx, i, &items[i], msg)
		for {
			err := prod.Produce(msg, reports)
			if err == nil {
				pending++
				break
			}
			if !isQueueFull(err) || time.Now().After(queueDeadline) {
				errs[i] = fmt.Errorf("produce: %w", err)
				done[i] = true
				break
			}
			// The local queue is full: wait for an acknowledgement to free room.
			select {
			case ev := <-reports:
				report(ev)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	deadline := time.NewTimer(p.sendTimeout + reportGrace)
	defer deadline.Stop()
	for pending > 0 {
		select {
		case ev := <-reports:
			report(ev)
		case <-deadline.C:
			for i := range items {
				if !done[i] {
					errs[i] = errNoReport
				}
			}
			return errs
		}
	}
	return errs
}

// message builds the record that resends it: key and value exactly as stored (a NULL value, a
// tombstone, as a null value), the stored headers minus the error headers of the failure's
// source format and any earlier copies of the three resend headers, then
// jeap_eh_target_service (the service that failed), jeap_eh_error_handling_service (this
// service) and redrive-origin (the causing message), each exactly once.
func (p *publisher) message(it *store.ResendItem, opaque any) *kafka.Message {
	topic := it.Topic
	partition := kafka.PartitionAny
	if p.partitioning == PartitionOriginal && it.Partition >= 0 { // redrive.UnknownPosition: any
		partition = it.Partition
	}
	return &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: partition},
		Key:            it.Key,
		Value:          it.Value,
		Headers:        SourceResendHeaders(it.SourceFormat, it.Headers, it.PublisherService, p.service, it.CausingMessage),
		Opaque:         opaque,
	}
}

// ResendHeaders returns the headers of a resent record: stored in order with duplicates, except
// earlier copies of jeap_eh_target_service, jeap_eh_error_handling_service and redrive-origin,
// which are then added once each, in that order, with the UTF-8 bytes of targetService,
// resendingService and causingMessage. It is SourceResendHeaders for an MPFE source.
func ResendHeaders(stored []avro.Header, targetService, resendingService, causingMessage string) []kafka.Header {
	return SourceResendHeaders(redrive.SourceMPFE, stored, targetService, resendingService, causingMessage)
}

// SourceResendHeaders is ResendHeaders for a failure read from a source of the given format: it
// also leaves out the headers that the format's writer added when it dead-lettered the record
// (kafka_dlt-* for spring, __connect.errors.* for connect, __streams.errors.* for streams;
// redrive.SourceFormat.IsErrorHeader), so that the original's own headers remain, in order.
func SourceResendHeaders(format redrive.SourceFormat, stored []avro.Header, targetService, resendingService, causingMessage string) []kafka.Header {
	hs := make([]kafka.Header, 0, len(stored)+3)
	for _, h := range stored {
		switch h.Name {
		case avro.HeaderTargetService, avro.HeaderErrorHandlingService, avro.HeaderOrigin:
			continue
		}
		if format.IsErrorHeader(h.Name) {
			continue
		}
		hs = append(hs, kafka.Header{Key: h.Name, Value: h.Value})
	}
	return append(hs,
		kafka.Header{Key: avro.HeaderTargetService, Value: []byte(targetService)},
		kafka.Header{Key: avro.HeaderErrorHandlingService, Value: []byte(resendingService)},
		kafka.Header{Key: avro.HeaderOrigin, Value: []byte(causingMessage)},
	)
}

func isQueueFull(err error) bool {
	var kerr kafka.Error
	return errors.As(err, &kerr) && kerr.Code() == kafka.ErrQueueFull
}
