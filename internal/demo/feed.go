package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// feed is what the demo's record feeders share (the order generator and the dead-letter
// feeder): the settings every one has, an idempotent producer, and a loop that produces at a
// steady rate.
type feed struct {
	name     string
	producer *kafka.Producer
	log      *slog.Logger
	rate     float64
	limit    int
}

// newFeed checks the settings every feeder has, fills in the defaults of rate (defaultRate)
// and seed (the time), and starts the producer.
func newFeed(name, brokers string, log *slog.Logger, rate *float64, defaultRate float64, seed *uint64, limit int) (*feed, error) {
	if brokers == "" {
		return nil, errors.New("invalid config: Brokers is empty")
	}
	if log == nil {
		return nil, errors.New("invalid config: Logger is nil")
	}
	if *rate == 0 {
		*rate = defaultRate
	}
	if *rate < 0 {
		return nil, fmt.Errorf("invalid config: Rate %g is negative", *rate)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	p, err := newProducer(brokers)
	if err != nil {
		return nil, fmt.Errorf("%s producer: %w", name, err)
	}
	return &feed{name: name, producer: p, log: log, rate: *rate, limit: limit}, nil
}

// run produces next(n) for n = 0, 1, … at the feed's rate (limit records, or until ctx ends
// when the limit is 0), logging what fails; produced, when not nil, learns of each record the
// producer took. After the last record it flushes and waits for ctx to end. It closes the
// producer.
func (f *feed) run(ctx context.Context, next func(n int) *kafka.Message, produced func(n int)) error {
	defer f.producer.Close()
	go func() {
		for e := range f.producer.Events() {
			if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				f.log.Warn("demo "+f.name+": delivery failed", "error", m.TopicPartition.Error)
			}
		}
	}()
	tick := time.NewTicker(time.Duration(float64(time.Second) / f.rate))
	defer tick.Stop()
	for n := 0; f.limit == 0 || n < f.limit; n++ {
		if err := f.producer.Produce(next(n), nil); err != nil {
			f.log.Warn("demo "+f.name+": produce", "error", err)
		} else if produced != nil {
			produced(n)
		}
		select {
		case <-ctx.Done():
			f.producer.Flush(5000)
			return nil
		case <-tick.C:
		}
	}
	f.producer.Flush(10000)
	<-ctx.Done()
	return nil
}

func newProducer(brokers string) (*kafka.Producer, error) {
	return kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":  brokers,
		"acks":               "all",
		"enable.idempotence": true,
		"linger.ms":          5,
		"log_level":          3,
	})
}
