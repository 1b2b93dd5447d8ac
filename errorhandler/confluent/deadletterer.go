package confluent

import (
	"context"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/internal/engine"
)

// Delivery reports the outcome of one published MPFE: Done, Err, Wait, EventID and
// IdempotenceID.
type Delivery = engine.Delivery

// DeadLetterer publishes MPFEs for failed records, for consumers that keep their own poll
// loop: Publish returns at once and the Delivery reports when the error topic acknowledged the
// event (acks=all), which is when the failed record's offset may be committed. A failed attempt
// is retried with capped exponential backoff, never given up on its own. It is safe for
// concurrent use.
type DeadLetterer struct {
	d    *engine.DeadLetterer
	prod *producer
}

// NewDeadLetterer validates cfg and s (s.ConsumerConfig is not used) and starts the MPFE
// producer.
func NewDeadLetterer(cfg errorhandler.DeadLetterConfig, s Settings) (*DeadLetterer, error) {
	if err := s.validate(false); err != nil {
		return nil, err
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	dl := &DeadLetterer{}
	newProd := newProducer(s.producerConfig(), cfg.ErrorTopic, cfg.Logger.With("component", "redrive.errorhandler.deadletter"))
	d, err := engine.NewDeadLetterer(cfg, func(report func(*engine.Job, error)) (engine.Producer, error) {
		p, err := newProd(report)
		if err == nil {
			dl.prod = p.(*producer)
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("dead letter: %w", err)
	}
	dl.d = d
	return dl, nil
}

// Publish publishes the MPFE of msg's failure err. The phase is PhaseDecode when err's chain
// holds a *errorhandler.DecodeError, else PhaseProcess. Failed attempts are retried until the
// error topic acknowledges the event or ctx ends; only a Delivery whose Err is nil allows
// committing msg's offset. msg must not be modified until the Delivery is done.
func (d *DeadLetterer) Publish(ctx context.Context, msg *kafka.Message, err error) *Delivery {
	m := Message(msg)
	return d.d.Publish(ctx, &m, err)
}

// Health returns the producer's state: Retrying > 0 means the error topic cannot be written.
func (d *DeadLetterer) Health() errorhandler.DeadLetterHealth { return d.d.Health() }

// Close waits until every MPFE was acknowledged or ctx ends, then gives up the rest (their
// Deliveries report an error, so their records are not committed) and closes the producer.
// It returns an error when MPFEs were given up.
func (d *DeadLetterer) Close(ctx context.Context) error { return d.d.Close(ctx) }
