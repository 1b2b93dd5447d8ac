package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/franz"
)

// Entry is the ledger consumer's message: one booking of an amount.
type Entry struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount_cents"`
}

// LedgerPoisonPartition and LedgerPoisonIndex place the ledger's poison record: the
// LedgerPoisonIndex-th entry the ledger generator writes to partition LedgerPoisonPartition
// cannot be decoded, so the ledger consumer (policy Fail) halts that partition at it.
const (
	LedgerPoisonPartition = 1
	LedgerPoisonIndex     = 5
)

// LedgerConfig configures the ledger consumer and its generator.
type LedgerConfig struct {
	// Brokers are the seed brokers, comma-separated. Required.
	Brokers string
	// Topic is the ledger topic. Defaults to "ledger"; it needs at least two partitions.
	Topic string
	// ErrorTopic is where an operator's release with action dead-letter sends the halted
	// record. Required.
	ErrorTopic string
	// Interval is the time between two entries the generator writes. Defaults to 300ms.
	Interval time.Duration
	// Logger receives the consumer's logs. Required.
	Logger *slog.Logger
	// Metrics is where the consumer's collectors are registered. Required.
	Metrics prometheus.Registerer
}

func (c *LedgerConfig) setDefaults() error {
	if c.Brokers == "" || c.ErrorTopic == "" || c.Logger == nil || c.Metrics == nil {
		return errors.New("invalid ledger config: Brokers, ErrorTopic, Logger and Metrics are required")
	}
	if c.Topic == "" {
		c.Topic = "ledger"
	}
	if c.Interval <= 0 {
		c.Interval = 300 * time.Millisecond
	}
	return nil
}

// NewLedgerConsumer returns the sample consumer that shows containment: it runs on franz-go
// with both policies set to Fail, so the generator's poison record halts its partition (the
// health says so, the other partitions keep going) until an operator releases it through the
// health handler with skip or dead-letter.
func NewLedgerConsumer(cfg LedgerConfig) (*franz.Runner[[]byte, Entry], error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return franz.New(errorhandler.Config[[]byte, Entry]{
		GroupID:      "ledger-service",
		Topics:       []string{cfg.Topic},
		System:       "shop",
		Service:      "ledger-service",
		ValueDecoder: errorhandler.JSON[Entry](),
		Handler: errorhandler.HandlerFunc[[]byte, Entry](func(context.Context, errorhandler.Record[[]byte, Entry]) error {
			return nil // booked
		}),
		DecodePolicy:   errorhandler.Fail,
		ProcessPolicy:  errorhandler.Fail,
		DeadLetter:     errorhandler.DeadLetterConfig{ErrorTopic: cfg.ErrorTopic},
		CommitInterval: 500 * time.Millisecond,
		Logger:         cfg.Logger,
		Metrics:        cfg.Metrics,
	}, franz.Settings{Brokers: strings.Split(cfg.Brokers, ","), GroupInstanceID: "ledger-service-0"})
}

// RunLedgerGenerator writes ledger entries round-robin to partitions 0 and 1 of the ledger
// topic until ctx ends, the poison record among them (see LedgerPoisonIndex).
func RunLedgerGenerator(ctx context.Context, cfg LedgerConfig) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(cfg.Brokers, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("ledger generator: %w", err)
	}
	defer cl.Close()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		partition := int32(n % 2)
		value := fmt.Sprintf(`{"order_id":"o-%d","amount_cents":%d}`, n, 100+n)
		if partition == LedgerPoisonPartition && n/2 == LedgerPoisonIndex {
			value = `{"order_id":"o-poison","amount_cents":"twelve francs"}` // cannot be decoded
		}
		rec := &kgo.Record{Topic: cfg.Topic, Partition: partition, Key: []byte(fmt.Sprintf("o-%d", n)), Value: []byte(value)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("ledger generator: produce", "error", err)
		}
	}
}
