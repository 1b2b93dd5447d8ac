package franz

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/errorhandler/internal/engine"
)

// producer is the MPFE producer on a kgo client with acks=all and idempotence; each record's
// promise reports its outcome.
type producer struct {
	cl     *kgo.Client
	topic  string
	report func(*engine.Job, error)
}

func newProducer(s *Settings, topic string, log *slog.Logger) engine.NewProducerFunc {
	return func(report func(*engine.Job, error)) (engine.Producer, error) {
		cl, err := kgo.NewClient(s.producerOpts(log)...)
		if err != nil {
			return nil, fmt.Errorf("new producer client: %w", err)
		}
		if err := checkProducer(cl); err != nil {
			cl.Close()
			return nil, err
		}
		return &producer{cl: cl, topic: topic, report: report}, nil
	}
}

// Produce hands one MPFE to the client. kgo keeps a record's bytes until its promise, and
// the engine leaves key and value unchanged until then (see engine.Producer): no copy.
func (p *producer) Produce(j *engine.Job, key, value []byte) error {
	rec := &kgo.Record{Topic: p.topic, Key: key, Value: value}
	p.cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) { p.report(j, err) })
	return nil
}

// Purge fails the buffered MPFEs (reported as failed).
func (p *producer) Purge() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.cl.AbortBufferedRecords(ctx)
}

// Close flushes for at most timeout and closes the client.
func (p *producer) Close(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = p.cl.Flush(ctx)
	p.cl.Close()
}
