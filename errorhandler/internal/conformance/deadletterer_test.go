package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
	"github.com/redrive/redrive/errorhandler/franz"
)

// publisher is what both adapters' DeadLetterers offer, for a record read with
// confluent-kafka-go (converted for franz-go).
type publisher interface {
	publish(ctx context.Context, msg *kafka.Message, err error) *confluent.Delivery
	Health() eh.DeadLetterHealth
	Close(ctx context.Context) error
}

type confluentPublisher struct{ *confluent.DeadLetterer }

func (p confluentPublisher) publish(ctx context.Context, msg *kafka.Message, err error) *confluent.Delivery {
	return p.Publish(ctx, msg, err)
}

type franzPublisher struct{ *franz.DeadLetterer }

func (p franzPublisher) publish(ctx context.Context, msg *kafka.Message, err error) *franz.Delivery {
	rec := &kgo.Record{Topic: *msg.TopicPartition.Topic, Partition: msg.TopicPartition.Partition,
		Offset: int64(msg.TopicPartition.Offset), Key: msg.Key, Value: msg.Value, Timestamp: msg.Timestamp}
	for _, h := range msg.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return p.Publish(ctx, rec, err)
}

func (e *env) newDeadLetterer(cfg eh.DeadLetterConfig) (publisher, error) {
	switch e.a {
	case adapterConfluent:
		d, err := confluent.NewDeadLetterer(cfg, e.confluentSettings(e.k.Bootstrap()))
		return confluentPublisher{d}, err
	default:
		d, err := franz.NewDeadLetterer(cfg, e.franzSettings(e.k.Bootstrap()))
		return franzPublisher{d}, err
	}
}

// TestDeadLettererInOwnPollLoop uses the DeadLetterer the way a consumer with its own poll loop
// does: publish, and commit only after the Delivery reports success.
func TestDeadLettererInOwnPollLoop(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		sent := e.produce(0, "ok0", "bad1", "ok2")
		e.tun.deliveryTimeout = 200 * time.Millisecond
		dl, err := e.newDeadLetterer(eh.DeadLetterConfig{
			ErrorTopic: testErrTopic, System: "test-system", Service: "test-service", GroupID: "own-loop",
			RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond,
			Metrics: prometheus.NewRegistry(), Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer dl.Close(context.Background())

		msgs := e.k.ConsumeN(t, testTopic, 3, waitTimeout)
		decodeErr := &eh.DecodeError{Part: eh.PartValue, Topic: testTopic, Offset: 1, Data: msgs[1].Value, Err: errors.New("undecodable value")}
		del := dl.publish(context.Background(), msgs[1], decodeErr)
		if err := del.Wait(context.Background()); err != nil {
			t.Fatalf("delivery: %v", err)
		}
		if del.EventID() == "" || del.Err() != nil {
			t.Errorf("delivery %q err %v", del.EventID(), del.Err())
		}
		evs := e.mpfes(1)
		checkMPFE(t, evs[0], sent[1], eh.PhaseDecode)
		if evs[0].Identity.EventID != del.EventID() || evs[0].Identity.IdempotenceID != del.IdempotenceID() {
			t.Errorf("identity %+v, delivery says %s / %s", evs[0].Identity, del.EventID(), del.IdempotenceID())
		}
		m := confluent.Message(msgs[1])
		if want := eh.IdempotenceID("own-loop", &m); del.IdempotenceID() != want {
			t.Errorf("idempotenceId %s, want %s", del.IdempotenceID(), want)
		}

		// The error topic refuses writes: the Delivery never succeeds, and says why when its
		// context ends.
		fault := e.k.FailProduce(testErrTopic, -1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		del = dl.publish(ctx, msgs[2], errors.New("handler failed"))
		waitFor(t, "retrying reported", func() bool { return dl.Health().Retrying == 1 && dl.Health().LastError != "" })
		cancel()
		<-del.Done()
		if err := del.Err(); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not acknowledged") {
			t.Errorf("delivery error %v, want the deadline and the produce error", err)
		}
		fault.Remove()
		if n := e.errTopicCount(); n != 1 {
			t.Errorf("error topic has %d records, want 1", n)
		}
		if h := dl.Health(); h.InFlight != 0 || h.Retrying != 0 {
			t.Errorf("health after the give-up: %+v", h)
		}
	})
}
