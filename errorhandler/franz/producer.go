package franz

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/errorhandler/internal/engine"
)

// producer is the MPFE producer on a kgo client with acks=all and idempotence; each record's
// promise reports its outcome.
type producer struct {
	cl      *kgo.Client
	topic   string
	report  func(*engine.Job, error)
	promise func(*kgo.Record, error) // p.delivered, bound once
}

// mpfeRecord is the kgo record of one MPFE and its job, in one allocation: the record comes
// first, so that the promise, which kgo calls with the record it was given, finds the job
// without a closure per record.
type mpfeRecord struct {
	rec kgo.Record
	job *engine.Job
}

// recordPool holds mpfeRecords whose outcome was reported: kgo does not touch a record after
// calling its promise.
var recordPool = sync.Pool{New: func() any { return new(mpfeRecord) }}

// delivered reports the outcome of the MPFE of r, an mpfeRecord's record, and recycles it.
func (p *producer) delivered(r *kgo.Record, err error) {
	m := (*mpfeRecord)(unsafe.Pointer(r))
	j := m.job
	*m = mpfeRecord{}
	recordPool.Put(m)
	p.report(j, err)
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
		p := &producer{cl: cl, topic: topic, report: report}
		p.promise = p.delivered
		return p, nil
	}
}

// Produce hands one MPFE to the client. kgo keeps a record's bytes until its promise, and
// the engine leaves key and value unchanged until then (see engine.Producer): no copy.
func (p *producer) Produce(j *engine.Job, key, value []byte) error {
	m := recordPool.Get().(*mpfeRecord)
	m.rec.Topic, m.rec.Key, m.rec.Value, m.job = p.topic, key, value, j
	p.cl.Produce(context.Background(), &m.rec, p.promise)
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
