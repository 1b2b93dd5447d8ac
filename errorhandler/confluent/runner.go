package confluent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/internal/engine"
	"github.com/redrive/redrive/internal/kafkalog"
)

// Tuning of the poll loop.
const (
	// pollTimeout bounds how long the loop waits for a record, and so how fast it reacts to a
	// halt, a release or a dead-letter outcome.
	pollTimeout = 100 * time.Millisecond
	// burstSize is how many records are polled before they are handed to the workers.
	burstSize = 512
	// closeTimeout bounds the consumer's close at the end of Run, after the final commit.
	closeTimeout = 10 * time.Second
)

// Runner is a complete consumer on confluent-kafka-go: it owns the poll loop, rebalances,
// pausing and commits, hands each partition's records in order to the Handler, and applies
// the policies to failures.
type Runner[K, V any] struct {
	e *engine.Engine[K, V]
	s Settings
}

// New validates cfg and s and returns a Runner. Nothing connects before Run.
func New[K, V any](cfg errorhandler.Config[K, V], s Settings) (*Runner[K, V], error) {
	if err := s.validate(true); err != nil {
		return nil, err
	}
	e, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Runner[K, V]{e: e, s: s}, nil
}

// Run consumes until ctx ends, then shuts down cleanly: it stops taking records, waits (at
// most ShutdownTimeout) for running handlers and in-flight MPFEs, commits every final offset and
// leaves the group. It returns nil after a clean shutdown, or an error when the consumer failed
// fatally or records were let go uncommitted. Run may be called once.
func (r *Runner[K, V]) Run(ctx context.Context) error {
	cfg := r.e.Config()
	if _, err := r.e.Open(newProducer(r.s.producerConfig(), cfg.DeadLetter.ErrorTopic, r.e.Logger())); err != nil {
		return err
	}
	defer r.e.Stopped()
	ccfg := r.s.consumerConfig(cfg.GroupID)
	c, err := kafka.NewConsumer(&ccfg)
	if err != nil {
		_ = r.e.CloseDeadLetterer()
		return fmt.Errorf("run: new consumer: %w", err)
	}
	kafkalog.Forward(r.e.Logger(), "consumer", c.Logs())
	cons := &consumer{c: c}
	if err := c.SubscribeTopics(cfg.Topics, func(c *kafka.Consumer, ev kafka.Event) error {
		return r.rebalance(cons, ev)
	}); err != nil {
		_ = c.Close()
		_ = r.e.CloseDeadLetterer()
		return fmt.Errorf("run: subscribe %v: %w", cfg.Topics, err)
	}
	r.e.Start()
	r.e.Logger().Info("consumer started", "client", "confluent-kafka-go", "topics", cfg.Topics)

	var fatal error
	for ctx.Err() == nil && fatal == nil {
		fatal = r.pollBurst(c)
		r.e.Flush()
		r.e.Tick(cons)
	}
	err = r.e.Shutdown(cons)
	// The final offsets are committed: a close that hangs (librdkafka can, while it hands a
	// pending assignment over) loses nothing, so Run does not wait for it for ever.
	if cerr := kafkalog.CloseConsumer(c, closeTimeout); errors.Is(cerr, kafkalog.ErrCloseTimeout) {
		r.e.Logger().Warn("consumer close did not finish; leaving it to the process exit", "error", cerr)
	} else if cerr != nil {
		err = errors.Join(err, fmt.Errorf("close consumer: %w", cerr))
	}
	r.e.Logger().Info("consumer stopped")
	return errors.Join(fatal, err)
}

// pollBurst polls up to burstSize events, waiting at most pollTimeout for the first.
func (r *Runner[K, V]) pollBurst(c *kafka.Consumer) error {
	timeout := int(pollTimeout / time.Millisecond)
	for range burstSize {
		ev := c.Poll(timeout)
		if ev == nil {
			return nil
		}
		timeout = 0
		switch e := ev.(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				r.warn("consumer error", e.TopicPartition.Error)
				continue
			}
			m := Message(e)
			r.e.Dispatch(&m)
		case kafka.Error:
			if e.IsFatal() {
				r.e.Logger().Error("consumer failed fatally", "error", e)
				return fmt.Errorf("consumer: %w", e)
			}
			r.warn("consumer error", e)
		}
	}
	return nil
}

func (r *Runner[K, V]) warn(msg string, err error) {
	if ok, n := r.e.Throttle("consumer-error"); ok {
		r.e.Logger().Warn(msg, "error", err, "suppressed", n)
	}
}

// rebalance is the consumer's rebalance callback; it runs inside Poll, on the poll loop.
func (r *Runner[K, V]) rebalance(cons *consumer, ev kafka.Event) error {
	c := cons.c
	cooperative := c.GetRebalanceProtocol() == "COOPERATIVE"
	log := r.e.Logger()
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		tps := toTPs(e.Partitions)
		if !cooperative {
			// An eager assignment is the whole set: let go of anything not in it.
			keep := map[engine.TP]bool{}
			for _, tp := range tps {
				keep[tp] = true
			}
			var gone []engine.TP
			for _, tp := range r.e.Assigned() {
				if !keep[tp] {
					gone = append(gone, tp)
				}
			}
			r.e.Revoke(cons, gone, true)
		}
		r.e.Assign(tps)
		log.Info("partitions assigned", "partitions", describeTPs(e.Partitions))
		var err error
		if cooperative {
			err = c.IncrementalAssign(e.Partitions)
		} else {
			err = c.Assign(e.Partitions)
		}
		if err != nil {
			log.Error("assign partitions", "error", err)
		}
	case kafka.RevokedPartitions:
		lost := c.AssignmentLost()
		r.e.Revoke(cons, toTPs(e.Partitions), !lost)
		log.Info("partitions revoked", "partitions", describeTPs(e.Partitions), "lost", lost)
		var err error
		if cooperative {
			err = c.IncrementalUnassign(e.Partitions)
		} else {
			err = c.Unassign()
		}
		if err != nil {
			log.Error("unassign partitions", "error", err)
		}
	}
	return nil
}

// Health returns a snapshot of the runner's state.
func (r *Runner[K, V]) Health() errorhandler.Health { return r.e.Health() }

// Release releases the halted partition topic/partition: its halted record is skipped or
// dead-lettered (action), and the partition resumes after it. When offset is not negative it
// must be the halted record's offset (ErrWrongOffset otherwise), so that an operator releases
// the record they looked at.
func (r *Runner[K, V]) Release(ctx context.Context, topic string, partition int32, offset int64, action errorhandler.Action) error {
	return r.e.Release(ctx, topic, partition, offset, action)
}

// HealthHandler returns an http.Handler that serves the health snapshot as JSON on GET (status
// 200 whether ok or degraded: a halted partition is not a reason to restart the process) and
// releases a halted partition on POST with a JSON body
// {"topic": "...", "partition": 3, "offset": 42, "action": "skip" | "dead-letter"}
// (offset optional). Errors are application/problem+json.
func (r *Runner[K, V]) HealthHandler() http.Handler { return r.e.HealthHandler() }

// consumer carries out the engine's requests on a confluent-kafka-go consumer.
type consumer struct{ c *kafka.Consumer }

func kafkaTP(tp engine.TP) kafka.TopicPartition {
	topic := tp.Topic
	return kafka.TopicPartition{Topic: &topic, Partition: tp.Partition}
}

func (k *consumer) Pause(tp engine.TP) error {
	return k.c.Pause([]kafka.TopicPartition{kafkaTP(tp)})
}

// Resume seeks to offset whenever it is known: librdkafka then drops what it fetched before.
func (k *consumer) Resume(tp engine.TP, offset int64, _ bool) error {
	ktp := kafkaTP(tp)
	if offset >= 0 {
		ktp.Offset = kafka.Offset(offset)
		res, err := k.c.SeekPartitions([]kafka.TopicPartition{ktp})
		if err == nil && len(res) == 1 && res[0].Error != nil {
			err = res[0].Error
		}
		if err != nil {
			return fmt.Errorf("seek to %d: %w", offset, err)
		}
	}
	return k.c.Resume([]kafka.TopicPartition{kafkaTP(tp)})
}

func (k *consumer) Commit(offs []engine.CommitOffset) error {
	tps := make([]kafka.TopicPartition, len(offs))
	for i, o := range offs {
		tps[i] = kafkaTP(o.TP)
		tps[i].Offset = kafka.Offset(o.Offset)
	}
	res, err := k.c.CommitOffsets(tps)
	if err != nil {
		return err
	}
	for i := range offs {
		offs[i].Err = errors.New("not in the commit response")
		for _, tp := range res {
			if tp.Topic != nil && *tp.Topic == offs[i].Topic && tp.Partition == offs[i].Partition {
				offs[i].Err = tp.Error
			}
		}
	}
	return nil
}

func toTPs(tps []kafka.TopicPartition) []engine.TP {
	out := make([]engine.TP, 0, len(tps))
	for _, tp := range tps {
		if tp.Topic != nil {
			out = append(out, engine.TP{Topic: *tp.Topic, Partition: tp.Partition})
		}
	}
	return out
}

// describeTPs lists partitions as "topic[p]" for logs.
func describeTPs(tps []kafka.TopicPartition) string {
	var b strings.Builder
	for i, tp := range tps {
		if i > 0 {
			b.WriteString(" ")
		}
		if tp.Topic != nil {
			b.WriteString(*tp.Topic)
		}
		fmt.Fprintf(&b, "[%d]", tp.Partition)
	}
	return b.String()
}
