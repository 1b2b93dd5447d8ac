package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
)

// TestInPlaceRetries: a TEMPORARY failure is retried in place, in order, before the process
// policy applies; a retry that succeeds produces no event; the final failure's event records
// the attempts; the consumer stays in its group through backoffs longer than its session
// timeout (and, for librdkafka, its max.poll.interval.ms); a tombstone that fails is
// dead-lettered with the value-null marker.
func TestInPlaceRetries(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 2)
		e.tun.sessionTimeout = 2 * time.Second
		topic := testTopic
		var sent []*kafka.Message
		for i, v := range []string{"ok0", "flaky1", "ok2", "down3", "perm4", "ok5", "<tombstone>", "ok7"} {
			m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)}
			if v == "<tombstone>" {
				m.Value = nil
			}
			sent = append(sent, e.k.Produce(t, m)...)
		}
		e.produce(1, values("ok", 20)...)

		var mu sync.Mutex
		var order []string // partition 0: offset/attempt
		calls := map[string]int{}
		h := eh.HandlerFunc[[]byte, string](func(_ context.Context, rec eh.Record[[]byte, string]) error {
			if rec.Message.Partition != 0 {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			order = append(order, fmt.Sprintf("%d/%d", rec.Message.Offset, rec.Attempt))
			name := rec.Value
			if rec.Tombstone {
				name = "tombstone"
			}
			calls[name]++
			switch {
			case name == "flaky1" && calls[name] < 3:
				return eh.Temporary(errors.New("database blip"), "DB_BLIP")
			case name == "down3":
				return eh.Temporary(errors.New("database down"), "DB_DOWN")
			case name == "perm4":
				return eh.Permanent(errors.New("invalid order"), "INVALID")
			case name == "tombstone":
				return eh.Permanent(errors.New("cannot delete"), "NO_DELETE")
			}
			return nil
		})
		group := "inplace"
		cfg := e.config(group, nil)
		cfg.Handler = h
		cfg.ProcessPolicy = eh.DeadLetter
		cfg.Concurrency = 1 // a waiting partition must give its slot to the other one
		// Backoffs (3s ±20%) longer than the session timeout (2s): the member must stay in the group.
		cfg.Retry = eh.InPlaceRetry{Attempts: 3, Backoff: 3 * time.Second, MaxBackoff: 3 * time.Second}
		s := e.start(cfg)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		stable, err := e.k.Fake().WaitGroupStable(ctx, group, 1)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "partition 1 committed to the end", func() bool { return e.committed(group, 1) == 20 })
		waitFor(t, "partition 0 committed to the end", func() bool { return e.committed(group, 0) == 8 })
		if gi := e.k.Fake().GroupInfo(group); gi == nil || gi.Epoch != stable.Epoch || len(gi.Members) != 1 {
			t.Errorf("the group rebalanced during the backoffs: epoch %d -> %+v", stable.Epoch, gi)
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := strings.Join(order, " ")
		mu.Unlock()
		if want := "0/1 1/1 1/2 1/3 2/1 3/1 3/2 3/3 4/1 5/1 6/1 7/1"; got != want {
			t.Errorf("partition 0 handled %s, want %s", got, want)
		}
		if n := metricValue(e.reg, "redrive_errorhandler_inplace_retries_total", map[string]string{"topic": testTopic}); n != 4 {
			t.Errorf("in-place retries counted %v, want 4", n)
		}
		evs := e.mpfes(3)
		if n := e.errTopicCount(); n != 3 {
			t.Fatalf("%d MPFEs, want 3: a retry that succeeds produces none", n)
		}
		for i, want := range []struct {
			offset   int64
			attempts string
			temp     avro.Temporality
		}{{3, "3", avro.Temporary}, {4, "1", avro.Permanent}, {6, "1", avro.Permanent}} {
			ev := evs[i]
			md := ev.Payload.FailedMessageMetadata
			if ev.References.Message.Offset != want.offset || ev.References.ErrorType.Temporality != want.temp ||
				string(md.Headers[avro.InPlaceAttemptsEntry]) != want.attempts {
				t.Errorf("MPFE %d: offset %d, %s, %s=%q; want %d, %s, %s", i, ev.References.Message.Offset,
					ev.References.ErrorType.Temporality, avro.InPlaceAttemptsEntry, md.Headers[avro.InPlaceAttemptsEntry], want.offset, want.temp, want.attempts)
			}
			_, null := md.Headers[avro.ValueNullEntry]
			if null != (want.offset == 6) {
				t.Errorf("MPFE %d: %s present %v", i, avro.ValueNullEntry, null)
			}
		}
		tomb := evs[2]
		if tomb.Payload.OriginalMessage == nil || len(tomb.Payload.OriginalMessage) != 0 || string(tomb.Payload.FailedMessageMetadata.Headers[avro.ValueNullEntry]) != "true" {
			t.Errorf("tombstone MPFE: originalMessage %q, %s=%q", tomb.Payload.OriginalMessage, avro.ValueNullEntry, tomb.Payload.FailedMessageMetadata.Headers[avro.ValueNullEntry])
		}
		if string(tomb.Payload.OriginalKey) != string(sent[6].Key) {
			t.Errorf("tombstone key %q, want %q", tomb.Payload.OriginalKey, sent[6].Key)
		}
	})
}
