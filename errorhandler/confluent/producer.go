package confluent

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/errorhandler/internal/engine"
	"github.com/redrive/redrive/internal/kafkalog"
)

// queueFullWait bounds how long one produce call waits for space in the producer's queue
// before the attempt counts as failed and is retried with backoff.
const queueFullWait = 5 * time.Second

// producer is the MPFE producer on librdkafka: it replaces itself when it fails fatally (an
// idempotent producer can), and its delivery reports go to report.
type producer struct {
	cfg    kafka.ConfigMap
	topic  string
	log    *slog.Logger
	report func(*engine.Job, error)

	mu   sync.RWMutex
	prod *kafka.Producer
	wg   sync.WaitGroup // event loops

	delivered chan struct{} // notified on each delivery report, for queue-full waits
}

func newProducer(cfg kafka.ConfigMap, topic string, log *slog.Logger) engine.NewProducerFunc {
	return func(report func(*engine.Job, error)) (engine.Producer, error) {
		p := &producer{cfg: cfg, topic: topic, log: log, report: report, delivered: make(chan struct{}, 1)}
		kp, err := p.start()
		if err != nil {
			return nil, err
		}
		p.prod = kp
		return p, nil
	}
}

func (p *producer) start() (*kafka.Producer, error) {
	cfg := kafka.ConfigMap{}
	for k, v := range p.cfg {
		cfg[k] = v
	}
	kp, err := kafka.NewProducer(&cfg)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	kafkalog.Forward(p.log, "dead-letter producer", kp.Logs())
	p.wg.Add(1)
	go p.eventLoop(kp)
	return kp, nil
}

// Produce hands one MPFE to librdkafka, which copies key and value.
func (p *producer) Produce(j *engine.Job, key, value []byte) error {
	msg := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &p.topic, Partition: kafka.PartitionAny},
		Key:            key,
		Value:          value,
		Opaque:         j,
	}
	deadline := time.Time{}
	for {
		p.mu.RLock()
		kp := p.prod
		err := kp.Produce(msg, nil)
		p.mu.RUnlock()
		if err == nil {
			return nil
		}
		var kerr kafka.Error
		if errors.As(err, &kerr) && kerr.Code() == kafka.ErrQueueFull {
			if deadline.IsZero() {
				deadline = time.Now().Add(queueFullWait)
			}
			if time.Now().Before(deadline) {
				p.waitDelivery()
				continue
			}
		}
		if errors.As(err, &kerr) && kerr.IsFatal() {
			p.replace(kp)
		}
		return err
	}
}

// waitDelivery waits for the next delivery report (space in the producer's queue), at most
// 50ms.
func (p *producer) waitDelivery() {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.delivered:
	case <-t.C:
	}
}

// eventLoop serves kp's delivery reports and errors until kp is closed.
func (p *producer) eventLoop(kp *kafka.Producer) {
	defer p.wg.Done()
	for ev := range kp.Events() {
		switch e := ev.(type) {
		case *kafka.Message:
			j, ok := e.Opaque.(*engine.Job)
			if !ok {
				continue
			}
			select {
			case p.delivered <- struct{}{}:
			default:
			}
			if err := e.TopicPartition.Error; err != nil {
				var kerr kafka.Error
				if errors.As(err, &kerr) && kerr.IsFatal() {
					go p.replace(kp)
				}
				p.report(j, err)
				continue
			}
			p.report(j, nil)
		case kafka.Error:
			if e.IsFatal() {
				p.log.Error("dead-letter producer failed fatally; replacing it", "error", e)
				go p.replace(kp)
				continue
			}
			p.log.Debug("dead-letter producer error", "error", e)
		}
	}
}

// replace swaps a producer that failed fatally for a new one; the old one's messages come back
// as failed deliveries and are retried on the new one.
func (p *producer) replace(old *kafka.Producer) {
	p.mu.Lock()
	if p.prod != old {
		p.mu.Unlock()
		return
	}
	kp, err := p.start()
	if err != nil {
		p.mu.Unlock()
		p.log.Error("cannot replace the dead-letter producer", "error", err)
		return
	}
	p.prod = kp
	p.mu.Unlock()
	_ = old.Purge(kafka.PurgeQueue | kafka.PurgeInFlight)
	go func() {
		// Purged messages report through Events (served by old's event loop); then close.
		old.Flush(10000)
		old.Close()
	}()
}

// Purge drops the MPFEs not yet acknowledged; they are reported as failed.
func (p *producer) Purge() {
	p.mu.RLock()
	_ = p.prod.Purge(kafka.PurgeQueue | kafka.PurgeInFlight)
	p.mu.RUnlock()
}

// Close flushes for at most timeout and closes the producer.
func (p *producer) Close(timeout time.Duration) {
	p.mu.Lock()
	kp := p.prod
	p.mu.Unlock()
	kp.Flush(int(timeout / time.Millisecond))
	kp.Close()
	p.wg.Wait()
}

// current returns the librdkafka producer in use (for tests).
func (p *producer) current() *kafka.Producer {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.prod
}
