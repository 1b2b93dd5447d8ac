package intake

import (
	"context"
	"errors"
	"hash/fnv"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/store"
)

// batch is one polled batch on its way to the commit of its offsets.
type batch struct {
	seq   uint64 // 1, 2, ... in poll order
	recs  []*record
	start time.Time
	// parts counts the writers' parts not yet written; failed marks a part that could not be.
	// Both belong to the committer once the parts are sent.
	parts  int
	failed bool
	span   trace.Span // nil: tracing off
}

// job is one writer's part of a batch.
type job struct {
	batch *batch
	recs  []*record
}

// done reports a written part (err nil) or one given up (ctx ended).
type done struct {
	batch *batch
	err   error
}

// errAbandoned marks the parts a writer skips after one of its parts could not be written.
var errAbandoned = errors.New("an earlier part of this writer was not written")

// split decodes the polled records and deals them to the writers by causing message, so that
// the failures of one message are stored by one writer, in order (and numbered right); a
// record that did not decode goes by partition.
func (in *Intake) split(seq uint64, msgs []*kafka.Message) (*batch, [][]*record) {
	in.metrics.batchSize.Observe(float64(len(msgs)))
	b := &batch{seq: seq, recs: make([]*record, len(msgs)), start: time.Now()}
	parts := make([][]*record, in.cfg.Writers)
	for i, m := range msgs {
		r := in.decode(m)
		b.recs[i] = r
		var w int
		if r.bad() {
			w = int(uint32(m.TopicPartition.Partition) % uint32(in.cfg.Writers))
		} else {
			h := fnv.New32a()
			_, _ = h.Write([]byte(r.prep.CausingMessage()))
			w = int(h.Sum32() % uint32(in.cfg.Writers))
		}
		parts[w] = append(parts[w], r)
	}
	for _, p := range parts {
		if len(p) > 0 {
			b.parts++
		}
	}
	b.span = in.tracer.startBatch(b.recs)
	return b, parts
}

// writeLoop writes one writer's parts in order and reports each to the committer. Once a part
// could not be written (ctx ended), the writer gives up its later ones too.
func (in *Intake) writeLoop(ctx context.Context, prod *kafka.Producer, jobs <-chan job, dones chan<- done) {
	abandoned := false
	for j := range jobs {
		if abandoned {
			dones <- done{batch: j.batch, err: errAbandoned}
			continue
		}
		err := in.write(ctx, prod, j.recs)
		if err != nil {
			abandoned = true
		}
		dones <- done{batch: j.batch, err: err}
	}
}

// commitLoop commits the batches' offsets in poll order, each once all its parts are written.
// From the first batch with a part not written on, it commits nothing: committing a later
// batch would skip that part's records, which are delivered again instead.
func (in *Intake) commitLoop(cons *kafka.Consumer, dones <-chan done) {
	waiting := make(map[uint64]*batch)
	next := uint64(1)
	stopped := false
	for d := range dones {
		b := d.batch
		b.parts--
		if d.err != nil {
			b.failed = true
		}
		waiting[b.seq] = b
		for {
			b, ok := waiting[next]
			if !ok || b.parts > 0 {
				break
			}
			delete(waiting, next)
			next++
			if b.failed && !stopped {
				stopped = true
				in.log.Warn("batch left uncommitted at shutdown; it and the later ones will be delivered again",
					"records", len(b.recs))
			}
			if !stopped {
				in.commit(cons, b)
			}
			endBatch(b.span, stopped)
		}
	}
}

// write stores a writer's part of a batch and dead-letters its bad records, in that order.
func (in *Intake) write(ctx context.Context, prod *kafka.Producer, recs []*record) error {
	if err := in.redecode(ctx, recs); err != nil {
		return err
	}
	good := make([]*record, 0, len(recs))
	for _, r := range recs {
		if !r.bad() {
			good = append(good, r)
		}
	}
	if err := in.ingest(ctx, good); err != nil {
		return err
	}
	var bad []*record
	for _, r := range recs {
		if r.bad() {
			bad = append(bad, r)
		}
	}
	return in.deadLetter(ctx, prod, bad)
}

// ingest stores the records, retrying while Postgres fails. When Postgres refuses the data of a
// batch without naming the event, it halves the batch (in order, so that attempt numbers stay
// right) until it finds the refused records, and marks them bad. It returns only when every
// record is stored or marked, or ctx ends.
func (in *Intake) ingest(ctx context.Context, recs []*record) error {
	if len(recs) == 0 {
		return nil
	}
	batch := make([]store.Prepared, len(recs))
	for i, r := range recs {
		batch[i] = r.prep
	}
	backoff := in.newBackoff()
	for {
		wctx, cancel := context.WithTimeout(ctx, in.cfg.WriteTimeout)
		res, err := in.cfg.Store.IngestPrepared(wctx, batch, in.cfg.NextAttempt)
		cancel()
		if err == nil {
			in.storeErr.Store(nil)
			in.count(recs, res)
			return nil
		}
		var bde *redrive.BadDataError
		if errors.As(err, &bde) {
			in.storeErr.Store(nil)
			if bde.Index >= 0 && bde.Index < len(recs) {
				recs[bde.Index].reject(checkData, err)
				rest := make([]*record, 0, len(recs)-1)
				rest = append(append(rest, recs[:bde.Index]...), recs[bde.Index+1:]...)
				return in.ingest(ctx, rest)
			}
			if len(recs) == 1 {
				recs[0].reject(checkRefused, err)
				return nil
			}
			half := len(recs) / 2
			if err := in.ingest(ctx, recs[:half]); err != nil {
				return err
			}
			return in.ingest(ctx, recs[half:])
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		in.storeErr.Store(&err)
		in.metrics.storeErrors.Inc()
		in.log.Error("cannot write batch to postgres; retrying, offsets not committed", "records", len(recs), "error", err)
		if err := backoff.wait(ctx); err != nil {
			return err
		}
	}
}

func (in *Intake) count(recs []*record, res store.IngestResult) {
	for i, o := range res.Outcomes {
		if o.Duplicate {
			in.metrics.duplicates.Inc()
			continue
		}
		e := recs[i].prep.Incoming().Event
		in.metrics.ingested.WithLabelValues(string(e.References.ErrorType.Temporality),
			e.References.Message.TopicName, e.Publisher.Service).Inc()
	}
}

// commit commits, for every partition of the batch that the consumer still owns, the offset
// after the batch's last record. A failed commit is logged: its records are delivered again
// and skipped as duplicates.
func (in *Intake) commit(cons *kafka.Consumer, b *batch) {
	defer func() { in.metrics.batchDuration.Observe(time.Since(b.start).Seconds()) }()
	recs := b.recs
	type tp struct {
		topic     string
		partition int32
	}
	next := make(map[tp]kafka.Offset)
	for _, r := range recs {
		k := tp{deref(r.msg.TopicPartition.Topic), r.msg.TopicPartition.Partition}
		if o := r.msg.TopicPartition.Offset + 1; o > next[k] {
			next[k] = o
		}
	}
	var owned map[tp]bool // nil: ownership unknown, commit everything
	if assigned, err := cons.Assignment(); err == nil {
		owned = make(map[tp]bool, len(assigned))
		for _, a := range assigned {
			owned[tp{deref(a.Topic), a.Partition}] = true
		}
	}
	offsets := make([]kafka.TopicPartition, 0, len(next))
	for k, o := range next {
		if owned != nil && !owned[k] {
			in.log.Info("partition revoked before its batch was committed; its records will be delivered again",
				"topic", k.topic, "partition", k.partition)
			continue
		}
		offsets = append(offsets, kafka.TopicPartition{Topic: &k.topic, Partition: k.partition, Offset: o})
	}
	if len(offsets) == 0 {
		return
	}
	if _, err := cons.CommitOffsets(offsets); err != nil {
		in.metrics.commitErrors.Inc()
		in.log.Warn("commit offsets; the batch will be delivered again and skipped as duplicates", "error", err)
	}
}
