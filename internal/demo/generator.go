package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// GeneratorConfig configures the record generator.
type GeneratorConfig struct {
	// Brokers is the bootstrap.servers list. Required.
	Brokers string
	// Topic is the orders topic. Defaults to "orders".
	Topic string
	// Rate is how many records per second are produced. Defaults to 4.
	Rate float64
	// Limit stops the generator after this many records; 0 means no limit.
	Limit int
	// Seed makes the mix reproducible. Defaults to the time.
	Seed uint64
	// Logger receives the generator's logs. Required.
	Logger *slog.Logger
}

// Generator produces a steady mix of orders: mostly good ones, and undecodable bytes,
// temporary failures (which succeed after a resend), permanent failures and panics.
type Generator struct {
	cfg      GeneratorConfig
	feed     *feed
	rnd      *rand.Rand
	produced map[Kind]int
}

// NewGenerator returns a generator; Run starts it.
func NewGenerator(cfg GeneratorConfig) (*Generator, error) {
	if cfg.Topic == "" {
		cfg.Topic = "orders"
	}
	f, err := newFeed("generator", cfg.Brokers, cfg.Logger, &cfg.Rate, 4, &cfg.Seed, cfg.Limit)
	if err != nil {
		return nil, err
	}
	return &Generator{cfg: cfg, feed: f, rnd: rand.New(rand.NewPCG(cfg.Seed, 7)), produced: map[Kind]int{}}, nil
}

// kindAt chooses the kind of the n-th record: the first few cover every kind, then a weighted
// random mix (55 % good, 15 % temporary, 12 % permanent, 12 % undecodable, 6 % panic).
func (g *Generator) kindAt(n int) Kind {
	first := []Kind{KindGood, KindTemporary, KindPermanent, KindUndecodable, KindPanic}
	if n < len(first) {
		return first[n]
	}
	switch r := g.rnd.IntN(100); {
	case r < 55:
		return KindGood
	case r < 70:
		return KindTemporary
	case r < 82:
		return KindPermanent
	case r < 94:
		return KindUndecodable
	default:
		return KindPanic
	}
}

// record builds the n-th record.
func (g *Generator) record(n int) (*kafka.Message, Kind) {
	kind := g.kindAt(n)
	id := fmt.Sprintf("order-%06d", n+1)
	customers := []string{"ada", "grace", "linus", "barbara", "ken"}
	o := Order{ID: id, Customer: customers[g.rnd.IntN(len(customers))], Amount: 100 + g.rnd.IntN(50000), Kind: kind}
	if kind == KindPermanent {
		o.Amount = -o.Amount
	}
	value, _ := json.Marshal(o)
	if kind == KindUndecodable {
		hostile := [][]byte{
			{0x00, 0x00, 0x00, 0x00, 0x07, 0x02, 0x0c, 'o', 'r', 'd', 'e', 'r', 0xff, 0xfe},
			[]byte(`<script>alert("pwned")</script>`),
			append([]byte(`{"id": "`+id+`", "amount_cents": `), 0xC3, 0x28),
		}
		value = hostile[g.rnd.IntN(len(hostile))]
	}
	trace := fmt.Sprintf("00-%016x%016x-%016x-01", g.rnd.Uint64(), g.rnd.Uint64(), g.rnd.Uint64())
	topic := g.cfg.Topic
	return &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key:            []byte(id),
		Value:          value,
		Headers: []kafka.Header{
			{Key: "order-id", Value: []byte(id)},
			{Key: "message-type", Value: []byte("OrderPlaced")},
			{Key: "message-version", Value: []byte("1.0.0")},
			{Key: "traceparent", Value: []byte(trace)},
			{Key: "tag", Value: []byte("demo")},
			{Key: "tag", Value: []byte(string(kind))},
			{Key: "binary", Value: []byte{0x00, 0x01, 0xfe, 0xff}},
		},
	}, kind
}

// Run produces records until ctx ends or Limit is reached, then flushes and closes the producer.
func (g *Generator) Run(ctx context.Context) error {
	var kind Kind
	return g.feed.run(ctx, func(n int) *kafka.Message {
		msg, k := g.record(n)
		kind = k
		return msg
	}, func(int) { g.produced[kind]++ })
}

// Produced returns how many records of each kind were handed to the producer. Call it after Run
// returned.
func (g *Generator) Produced() map[Kind]int { return g.produced }

// newProducer returns the idempotent producer of the demo's feeders.
