package errorhandler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDeadLettererInOwnPollLoop uses the DeadLetterer the way a consumer with its own poll loop
// does: publish, and commit only after the Delivery reports success.
func TestDeadLettererInOwnPollLoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	sent := e.produce(0, "ok0", "bad1", "ok2")
	dl, err := NewDeadLetterer(DeadLetterConfig{
		Brokers: e.k.Bootstrap(), ErrorTopic: testErrTopic, System: "test-system", Service: "test-service",
		ProducerConfig: kafka.ConfigMap{"linger.ms": 1, "log_level": 0, "message.timeout.ms": 200},
		RetryBackoff:   10 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond,
		Metrics: prometheus.NewRegistry(), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close(context.Background())

	msgs := e.k.ConsumeN(t, testTopic, 3, waitTimeout)
	decodeErr := &DecodeError{Part: PartValue, Topic: testTopic, Offset: 1, Data: msgs[1].Value, Err: errors.New("undecodable value")}
	del := dl.Publish(context.Background(), msgs[1], decodeErr)
	if err := del.Wait(context.Background()); err != nil {
		t.Fatalf("delivery: %v", err)
	}
	if del.EventID() == "" || del.Err() != nil {
		t.Errorf("delivery %q err %v", del.EventID(), del.Err())
	}
	evs := e.mpfes(1)
	checkMPFE(t, evs[0], sent[1], PhaseDecode)
	if evs[0].Identity.EventID != del.EventID() {
		t.Errorf("event id %s, delivery says %s", evs[0].Identity.EventID, del.EventID())
	}

	// The error topic refuses writes: the Delivery never succeeds, and says why when its
	// context ends.
	fault := e.k.FailProduce(testErrTopic, -1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	del = dl.Publish(ctx, msgs[2], errors.New("handler failed"))
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
}

// TestDeadLettererReplacesAFatallyFailedProducer: an idempotent producer can fail fatally; the
// DeadLetterer swaps it and MPFEs still get through.
func TestDeadLettererReplacesAFatallyFailedProducer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.produce(0, "x")
	dl, err := NewDeadLetterer(DeadLetterConfig{
		Brokers: e.k.Bootstrap(), ErrorTopic: testErrTopic, System: "s", Service: "svc",
		ProducerConfig: kafka.ConfigMap{"linger.ms": 1, "log_level": 0},
		RetryBackoff:   10 * time.Millisecond, Metrics: prometheus.NewRegistry(), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close(context.Background())
	dl.prodMu.RLock()
	old := dl.prod
	dl.prodMu.RUnlock()
	old.TestFatalError(kafka.ErrOutOfOrderSequenceNumber, "injected fatal error")
	waitFor(t, "producer replaced", func() bool {
		dl.prodMu.RLock()
		defer dl.prodMu.RUnlock()
		return dl.prod != old
	})
	msgs := e.k.ConsumeN(t, testTopic, 1, waitTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := dl.Publish(ctx, msgs[0], errors.New("boom")).Wait(ctx); err != nil {
		t.Fatalf("delivery after the replacement: %v", err)
	}
}
