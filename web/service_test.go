package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/internal/testkit/storekit"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/resend"
)

// Topics of the test service.
const (
	errorTopic    = "errors"
	deadTopic     = "errors-dlt"
	ordersTopic   = "orders"
	paymentsTopic = "payments"
)

// Tokens of the test service, as `redrive serve --api-tokens` takes them.
const (
	svcOperatorToken = "olivia-operator-secret-0001"
	svcViewerToken   = "victor-viewer-secret-00002"
	svcTokens        = "olivia:operator+payload:" + svcOperatorToken + ",victor:viewer+payload:" + svcViewerToken
)

// paymentSchema is the Avro schema of the payments topic's records, known to the core's
// payload decoder.
const paymentSchema = `{"type":"record","name":"PaymentCaptured","namespace":"com.example.payments","fields":[
	{"name":"id","type":"string"},{"name":"amount_cents","type":"long"},{"name":"currency","type":"string"}]}`

// service is redrive as `redrive serve` runs it, on a fresh database and an in-process Kafka:
// the intake consumes the error topic into Postgres, the resender republishes, the UI serves.
type service struct {
	t        *testing.T
	kafka    *testkit.Cluster
	pool     *pgxpool.Pool
	store    *storekit.Store
	codec    *avro.Codec
	sched    *resend.Scheduler
	srv      *httptest.Server
	seeded   map[string]seed // by name
	seedList []seed
}

// seed is one failure produced to the error topic.
type seed struct {
	name    string
	event   *avro.Event
	headers []avro.Header
	id      uuid.UUID // the stored failure's id, once ingested
}

func newService(t *testing.T) *service {
	t.Helper()
	s := &service{t: t, kafka: testkit.Kafka(t), pool: testkit.Postgres(t), seeded: map[string]seed{}}
	for _, topic := range []string{errorTopic, deadTopic, ordersTopic, paymentsTopic} {
		s.kafka.CreateTopic(t, topic, 1)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	s.store = storekit.New(t, s.pool)
	if s.codec, err = avro.NewCodec(avro.Config{}); err != nil {
		t.Fatal(err)
	}
	in, err := intake.New(intake.Config{
		Store:           s.store,
		NextAttempt:     resend.DefaultBackoff().Next,
		Codec:           s.codec,
		Bootstrap:       s.kafka.Bootstrap(),
		Topic:           errorTopic,
		DeadLetterTopic: deadTopic,
		GroupID:         "redrive-web-test",
		ConsumerConfig:  kafka.ConfigMap{"session.timeout.ms": 3000, "heartbeat.interval.ms": 300, "fetch.wait.max.ms": 50},
		BatchWait:       20 * time.Millisecond,
		Logger:          logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.sched, err = resend.New(resend.Config{
		Store:        s.store,
		Brokers:      s.kafka.Bootstrap(),
		Producer:     kafka.ConfigMap{"log_level": 4},
		ServiceName:  "redrive-test",
		Interval:     -1, // resends in these tests are the operators' only
		Housekeeping: resend.HousekeepingConfig{Interval: -1},
		SendTimeout:  10 * time.Second,
		Logger:       logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- in.Run(ctx) }()
	go func() { done <- s.sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service shutdown: %v", err)
			}
		}
	})

	tokens, err := auth.ParseTokens(svcTokens)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := payload.New(payload.Config{Schemas: []string{paymentSchema}})
	if err != nil {
		t.Fatal(err)
	}
	core, err := operator.New(operator.Config{Store: s.store, Resender: s.sched.Resender(), Payloads: payloads, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := auth.NewSessions(auth.SessionsConfig{Store: s.store})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Core: core, Auth: a, Logger: logger, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(h)
	t.Cleanup(s.srv.Close)
	return s
}

// newEvent returns an MPFE for a record of topic at offset that failed in service.
func newEvent(topic string, offset int64, service, code string, t avro.Temporality, key, value []byte, msg string) *avro.Event {
	created := time.Now().Add(-time.Duration(offset) * 7 * time.Minute).UTC().Truncate(time.Millisecond)
	trace := "java.lang.IllegalStateException: " + msg + "\n\tat com.example.Handler.handle(Handler.java:42)\n\tat com.example.Consumer.poll(Consumer.java:7)"
	return &avro.Event{
		Identity:  avro.Identity{EventID: uuid.NewString(), IdempotenceID: uuid.NewString(), Created: created},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "shop", Service: service},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: topic, Partition: 0, Offset: offset},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: t, Code: code},
		},
		Payload: avro.Payload{
			OriginalMessage: value, OriginalKey: key, ErrorMessage: msg,
			StackTrace: &trace, StackTraceHash: avro.Ptr("h-" + code),
			FailedMessageMetadata: &avro.Metadata{MessageTypeName: avro.Ptr(map[string]string{ordersTopic: "OrderPlaced", paymentsTopic: "PaymentCaptured"}[topic]),
				MessageTypeVersion: avro.Ptr("1.0.0")},
		},
		DomainEventVersion: avro.DomainEventVersion,
	}
}

// seedAll produces the test failures to the error topic and waits until the intake stored them.
func (s *service) seedAll() {
	t := s.t
	t.Helper()
	avroValue := paymentValue(t, "pay-7", 1999, "CHF")
	binary := append([]byte{0x00, 0x01, 0x02, 0x1b, 0x7f, 0xff, 0xfe}, []byte("card=4111\r\n\u202eevil")...)
	jsonHeaders := []avro.Header{
		{Name: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
		{Name: "content-type", Value: []byte("application/json")},
		{Name: "dup", Value: []byte("first")},
		{Name: "dup", Value: []byte("second")},
		{Name: "empty", Value: []byte{}},
		{Name: "null", Value: nil},
	}
	add := func(name string, e *avro.Event, headers []avro.Header) {
		sd := seed{name: name, event: e, headers: headers}
		s.seedList = append(s.seedList, sd)
	}
	add("json", newEvent(ordersTopic, 11, "billing", "DESERIALIZATION_FAILED", avro.Permanent,
		[]byte("order-11"), []byte(`{"orderId":11,"items":[{"sku":"A-1","qty":2}],"note":"gift"}`), "Unrecognized field \"note\" in OrderPlaced"), jsonHeaders)
	add("script", newEvent(ordersTopic, 12, "billing", "DESERIALIZATION_FAILED", avro.Permanent,
		[]byte("order-12"), []byte(`<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`),
		`bad <img src=x onerror="window.__xss=3"> input`), nil)
	add("binary", newEvent(paymentsTopic, 3, "payments", "TIMEOUT", avro.Temporary, nil, binary, "card service timed out after 5000 ms"), nil)
	add("avro", newEvent(paymentsTopic, 4, "ledger", "UNKNOWN_EXCEPTION", avro.Unknown, []byte("pay-7"), avroValue, "ledger rejected the booking"), nil)
	add("retry", newEvent(ordersTopic, 13, "billing", "DB_LOCKED", avro.Permanent,
		[]byte("order-13"), []byte(`{"orderId":13}`), "could not obtain lock on row in relation orders"), jsonHeaders)
	add("close", newEvent(ordersTopic, 14, "billing", "WRONG_EVENT_TYPE", avro.Permanent,
		[]byte("order-14"), []byte(`{"orderId":14}`), "expected OrderPlaced, got OrderCancelled"), nil)
	add("viewer", newEvent(ordersTopic, 15, "billing", "WRONG_EVENT_TYPE", avro.Permanent,
		[]byte("order-15"), []byte(`{"orderId":15}`), "expected OrderPlaced, got OrderUpdated"), nil)
	// Two failures of one message: the second came after a resend of the first.
	first := newEvent(ordersTopic, 16, "shipping", "TIMEOUT", avro.Temporary, []byte("order-16"), []byte(`{"orderId":16}`), "warehouse API timed out")
	first.Payload.FailedMessageMetadata.EventID = avro.Ptr("msg-order-16")
	again := newEvent(ordersTopic, 16, "shipping", "TIMEOUT", avro.Temporary, []byte("order-16"), []byte(`{"orderId":16}`), "warehouse API timed out again")
	again.Payload.FailedMessageMetadata.EventID = avro.Ptr("msg-order-16")
	again.Identity.Created = first.Identity.Created.Add(3 * time.Minute)
	add("chain-1", first, nil)
	add("chain-2", again, nil)
	for i := range 5 {
		add("bulk", newEvent(paymentsTopic, int64(20+i), "payments", "TIMEOUT", avro.Temporary, []byte("pay"), []byte(`{"n":1}`), "card service timed out"), nil)
	}

	msgs := make([]*kafka.Message, len(s.seedList))
	for i, sd := range s.seedList {
		if sd.headers != nil {
			if err := sd.event.Payload.FailedMessageMetadata.SetHeaders(sd.headers); err != nil {
				t.Fatal(err)
			}
		}
		value, err := s.codec.EncodeEvent(errorTopic, sd.event)
		if err != nil {
			t.Fatal(err)
		}
		// The key record keeps the failures of one message on one partition, in order.
		msgs[i] = testkit.Message(errorTopic, []byte(sd.event.Identity.IdempotenceID), value)
	}
	for _, m := range msgs { // one by one, so that the chain's attempts keep their order
		s.kafka.Produce(t, m)
	}
	s.waitFor("the intake to store the seeded failures", func() bool {
		var n int
		if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM failures").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(s.seedList)
	})
	for i := range s.seedList {
		sd := &s.seedList[i]
		if err := s.pool.QueryRow(context.Background(), "SELECT id FROM failures WHERE idempotence_id = $1",
			sd.event.Identity.IdempotenceID).Scan(&sd.id); err != nil {
			t.Fatalf("seed %s: %v", sd.name, err)
		}
		if _, ok := s.seeded[sd.name]; !ok {
			s.seeded[sd.name] = *sd
		}
	}
}

// waitFor polls cond until it holds, failing the test after 2 minutes (a generous bound: a
// loaded machine is slow, and the deadline only matters when cond never holds).
func (s *service) waitFor(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for state
	}
}

// state returns the stored state of a failure.
func (s *service) state(id uuid.UUID) redrive.State {
	s.t.Helper()
	d, err := s.store.FailureByID(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return d.State
}
