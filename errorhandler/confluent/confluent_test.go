package confluent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/internal/testkit"
)

// TestHeaderLayout: headers are handed over without copying, which needs the same layout.
func TestHeaderLayout(t *testing.T) {
	var k kafka.Header
	var h errorhandler.Header
	if unsafe.Sizeof(k) != unsafe.Sizeof(h) || unsafe.Offsetof(k.Key) != unsafe.Offsetof(h.Key) || unsafe.Offsetof(k.Value) != unsafe.Offsetof(h.Value) {
		t.Fatal("kafka.Header and errorhandler.Header differ in layout")
	}
	topic := "t"
	m := Message(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 2, Offset: 9},
		Headers: []kafka.Header{{Key: "a", Value: []byte("1")}, {Key: "b"}}})
	if m.Topic != "t" || m.Partition != 2 || m.Offset != 9 || len(m.Headers) != 2 || m.Headers[0].Key != "a" || string(m.Headers[0].Value) != "1" || m.Headers[1].Value != nil {
		t.Errorf("message %+v", m)
	}
	if KafkaMessage(&m) == nil {
		t.Error("KafkaMessage lost the raw record")
	}
}

func TestSettingsValidation(t *testing.T) {
	cfg := errorhandler.Config[[]byte, []byte]{
		GroupID: "g", Topics: []string{"t"}, System: "s", Service: "svc", ValueDecoder: errorhandler.Bytes(),
		Handler: errorhandler.HandlerFunc[[]byte, []byte](func(context.Context, errorhandler.Record[[]byte, []byte]) error { return nil }),
		Metrics: prometheus.NewRegistry(),
	}
	if _, err := New(cfg, Settings{Brokers: "localhost:1"}); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for name, s := range map[string]Settings{
		"no brokers":     {},
		"auto commit":    {Brokers: "b", ConsumerConfig: kafka.ConfigMap{"enable.auto.commit": true}},
		"weak acks":      {Brokers: "b", ProducerConfig: kafka.ConfigMap{"acks": 1}},
		"no idempotence": {Brokers: "b", ProducerConfig: kafka.ConfigMap{"enable.idempotence": false}},
		"instance twice": {Brokers: "b", GroupInstanceID: "a", ConsumerConfig: kafka.ConfigMap{"group.instance.id": "b"}},
		"spaced id":      {Brokers: "b", GroupInstanceID: "a "},
	} {
		if _, err := New(cfg, s); err == nil || !strings.Contains(err.Error(), "invalid settings") {
			t.Errorf("%s: New = %v, want an invalid settings error", name, err)
		}
	}
	static := Settings{Brokers: "b", GroupInstanceID: "orders-0"}
	if _, err := New(cfg, static); err != nil {
		t.Fatalf("static member: %v", err)
	}
	if got := static.consumerConfig("g")["group.instance.id"]; got != "orders-0" {
		t.Errorf("group.instance.id = %v, want orders-0", got)
	}
	if _, err := NewDeadLetterer(errorhandler.DeadLetterConfig{}, Settings{Brokers: "b"}); err == nil || !strings.Contains(err.Error(), "ErrorTopic is empty") {
		t.Errorf("NewDeadLetterer with an empty config: %v", err)
	}
}

// TestDeadLettererReplacesAFatallyFailedProducer: an idempotent producer can fail fatally; the
// DeadLetterer swaps it and MPFEs still get through.
func TestDeadLettererReplacesAFatallyFailedProducer(t *testing.T) {
	t.Parallel()
	k := testkit.Kafka(t)
	k.CreateTopic(t, "in", 1)
	k.CreateTopic(t, "errors", 1)
	k.Produce(t, testkit.Message("in", nil, []byte("x")))
	dl, err := NewDeadLetterer(errorhandler.DeadLetterConfig{
		ErrorTopic: "errors", System: "s", Service: "svc", GroupID: "g",
		RetryBackoff: 10 * time.Millisecond, Metrics: prometheus.NewRegistry(),
	}, Settings{Brokers: k.Bootstrap(), ProducerConfig: kafka.ConfigMap{"linger.ms": 1, "log_level": 0}})
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close(context.Background())
	old := dl.prod.current()
	old.TestFatalError(kafka.ErrOutOfOrderSequenceNumber, "injected fatal error")
	deadline := time.Now().Add(30 * time.Second)
	for dl.prod.current() == old {
		if time.Now().After(deadline) {
			t.Fatal("producer not replaced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	msgs := k.ConsumeN(t, "in", 1, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dl.Publish(ctx, msgs[0], errors.New("boom")).Wait(ctx); err != nil {
		t.Fatalf("delivery after the replacement: %v", err)
	}
}
