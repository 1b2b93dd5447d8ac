package resend

import (
	"context"
	"fmt"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/internal/kafkalog"
	"github.com/redrive/redrive/resend/resendtype"
	"github.com/redrive/redrive/store"
)

// The jobs runner (package jobs) sends through the Resender's producer with its own rate
// limiter, claims and marks: Publish, RetryAt and Delivered serve it.

// Publish produces one record per item, as a resend does (the stored key, value and headers,
// plus the resend headers), and waits for the acknowledgements. It returns one error per item:
// nil when the broker acknowledged the record; an error wrapping redrive.ErrClosed when the record was
// not sent because the Resender is shut down. It applies no rate limit: the caller has its own.
// The records' spans are children of the span of ctx (the job's batch), linked to their
// originals' traces.
func (r *Resender) Publish(ctx context.Context, items []store.ResendItem) []error {
	if !r.enter() {
		errs := make([]error, len(items))
		for i := range errs {
			errs[i] = redrive.ErrClosed
		}
		return errs
	}
	defer r.inflight.Done()
	start := time.Now()
	errs := r.s.pub.send(ctx, items)
	r.s.metrics.send.Observe(time.Since(start).Seconds())
	acked := 0
	for _, err := range errs {
		if err == nil {
			acked++
		}
	}
	r.s.metrics.acked.WithLabelValues(TriggerManual).Add(float64(acked))
	return errs
}

// RetryAt returns when a RETRY_PENDING failure whose resend was not acknowledged for the
// failures-th time is due again (Config.SendBackoff).
func (r *Resender) RetryAt(failures int, now time.Time) time.Time {
	return retryAt(r.s.cfg.SendBackoff, failures, now)
}

// deliveredMaxWait bounds one search of Delivered.
const deliveredMaxWait = 2 * time.Minute

// Delivered reports which of records reached the broker at or after since: it reads the
// partitions they may be in (their own with PartitionOriginal and a known partition, else
// every partition of the topic) from the first offset at since to the end, and returns the
// tags (resendtype.HeaderJobItem header values) it found. A job that resumes after a crash
// asks it about its in-flight records, so that it neither sends one twice nor counts one
// sent that was not. It returns an error when it cannot read every partition to its end.
//
// Each record is looked for on its cluster (resendtype.Tagged.Cluster).
func (r *Resender) Delivered(ctx context.Context, since time.Time, records []resendtype.Tagged) (map[string]bool, error) {
	found := map[string]bool{}
	if len(records) == 0 {
		return found, nil
	}
	ctx, cancel := context.WithTimeout(ctx, deliveredMaxWait)
	defer cancel()
	byCluster := map[string][]resendtype.Tagged{}
	for _, rec := range records {
		byCluster[clusterOf(rec.Cluster)] = append(byCluster[clusterOf(rec.Cluster)], rec)
	}
	for name, recs := range byCluster {
		pc, ok := r.s.pub.producerConfigOf(name)
		if !ok {
			return nil, fmt.Errorf("delivered: %w: %q", ErrClusterUnknown, name)
		}
		f, err := r.deliveredOn(ctx, pc, since, recs)
		if err != nil {
			if len(byCluster) > 1 {
				err = fmt.Errorf("cluster %s: %w", name, err)
			}
			return nil, err
		}
		for tag := range f {
			found[tag] = true
		}
	}
	return found, nil
}

// deliveredOn is Delivered for the records of one cluster, whose producer has the settings pc.
func (r *Resender) deliveredOn(ctx context.Context, pc kafka.ConfigMap, since time.Time, records []resendtype.Tagged) (map[string]bool, error) {
	found := map[string]bool{}
	want := map[string]bool{}
	parts := map[string]map[int32]bool{} // nil: every partition of the topic
	for _, rec := range records {
		want[rec.Tag] = true
		ps, seen := parts[rec.Topic]
		switch {
		case r.s.cfg.Partitioning == PartitionOriginal && rec.Partition >= 0 && (ps != nil || !seen):
			if ps == nil {
				ps = map[int32]bool{}
				parts[rec.Topic] = ps
			}
			ps[rec.Partition] = true
		default:
			parts[rec.Topic] = nil
		}
	}
	cfg := kafka.ConfigMap{
		"group.id":             r.owner + "/delivered",
		"enable.auto.commit":   false,
		"enable.partition.eof": true,
		"auto.offset.reset":    "earliest",
		"isolation.level":      "read_uncommitted",
		kafkalog.Enable:        true,
	}
	for k, v := range pc {
		if !producerOnly[k] {
			cfg[k] = v
		}
	}
	cfg["client.id"] = "redrive-job-check"
	c, err := kafka.NewConsumer(&cfg)
	if err != nil {
		return nil, fmt.Errorf("delivered: new consumer: %w", err)
	}
	kafkalog.Forward(r.s.cfg.Logger, "job delivery check", c.Logs())
	defer c.Close()
	timeout := func() int {
		d, ok := ctx.Deadline()
		if !ok {
			return 10000
		}
		return int(max(time.Millisecond, min(10*time.Second, time.Until(d))).Milliseconds())
	}
	var assign []kafka.TopicPartition
	ends := map[string]map[int32]int64{}
	for topic, ps := range parts {
		md, err := c.GetMetadata(&topic, false, timeout())
		if err != nil {
			return nil, fmt.Errorf("delivered: metadata of %s: %w", topic, err)
		}
		var tps []kafka.TopicPartition
		for _, p := range md.Topics[topic].Partitions {
			if ps == nil || ps[p.ID] {
				t := topic
				tps = append(tps, kafka.TopicPartition{Topic: &t, Partition: p.ID, Offset: kafka.Offset(since.UnixMilli())})
			}
		}
		offs, err := c.OffsetsForTimes(tps, timeout())
		if err != nil {
			return nil, fmt.Errorf("delivered: offsets of %s: %w", topic, err)
		}
		ends[topic] = map[int32]int64{}
		for _, tp := range offs {
			if tp.Error != nil {
				return nil, fmt.Errorf("delivered: offset of %s/%d: %w", topic, tp.Partition, tp.Error)
			}
			_, high, err := c.QueryWatermarkOffsets(topic, tp.Partition, timeout())
			if err != nil {
				return nil, fmt.Errorf("delivered: end of %s/%d: %w", topic, tp.Partition, err)
			}
			if tp.Offset < 0 || int64(tp.Offset) >= high {
				continue // nothing written there since
			}
			ends[topic][tp.Partition] = high
			assign = append(assign, tp)
		}
	}
	if len(assign) == 0 {
		return found, nil
	}
	if err := c.Assign(assign); err != nil {
		return nil, fmt.Errorf("delivered: assign: %w", err)
	}
	left := len(assign)
	finish := func(topic string, p int32) {
		if _, ok := ends[topic][p]; ok {
			delete(ends[topic], p)
			left--
		}
	}
	for left > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("delivered: %d partitions not read to their end: %w", left, err)
		}
		switch ev := c.Poll(100).(type) {
		case *kafka.Message:
			tp := ev.TopicPartition
			for _, h := range ev.Headers {
				if (h.Key == resendtype.HeaderJobItem || h.Key == resendtype.HeaderReleaseItem) && want[string(h.Value)] {
					found[string(h.Value)] = true
				}
			}
			if end, ok := ends[*tp.Topic][tp.Partition]; ok && int64(tp.Offset)+1 >= end {
				finish(*tp.Topic, tp.Partition)
			}
		case kafka.PartitionEOF:
			finish(*ev.Topic, ev.Partition)
		case kafka.Error:
			if ev.IsFatal() {
				return nil, fmt.Errorf("delivered: %w", ev)
			}
		}
	}
	return found, nil
}

// producerOnly are the producer's settings that a consumer does not take.
var producerOnly = map[string]bool{
	"acks": true, "enable.idempotence": true, "message.timeout.ms": true, "linger.ms": true,
	"partitioner": true, "go.delivery.report.fields": true, "go.delivery.reports": true,
	"compression.type": true, "compression.codec": true, "batch.size": true, "batch.num.messages": true,
	"queue.buffering.max.messages": true, "queue.buffering.max.kbytes": true, "queue.buffering.max.ms": true,
	"retries": true, "max.in.flight.requests.per.connection": true, "max.in.flight": true,
	"request.required.acks": true, "delivery.timeout.ms": true, "transactional.id": true,
	"sticky.partitioning.linger.ms": true, "go.batch.producer": true, "go.produce.channel.size": true,
}
