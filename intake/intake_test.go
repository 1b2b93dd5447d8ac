package intake

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// storedFailure is the part of a failures row the intake tests compare.
type storedFailure struct {
	State, Temporality, Code, Message string
	Topic                             string
	Partition                         int32
	Offset                            int64
	Key, Value                        []byte
	HeaderNames                       []string
	HeaderValues                      [][]byte
	MessageType                       *string
	CausingMessage                    string
	Attempt                           int
	NextAttemptAt                     *time.Time
}

func (e *env) failure(idem string) storedFailure {
	e.t.Helper()
	var f storedFailure
	err := e.pool.QueryRow(context.Background(), `
		SELECT state, temporality, error_code, error_message, original_topic, original_partition, original_offset,
			original_key, original_value, header_names, header_values, message_type, causing_message, attempt, next_attempt_at
		FROM failures WHERE idempotence_id = $1`, idem).Scan(&f.State, &f.Temporality, &f.Code, &f.Message, &f.Topic,
		&f.Partition, &f.Offset, &f.Key, &f.Value, &f.HeaderNames, &f.HeaderValues, &f.MessageType, &f.CausingMessage,
		&f.Attempt, &f.NextAttemptAt)
	if err != nil {
		e.t.Fatalf("failure %s: %v", idem, err)
	}
	return f
}

func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }

func checkStoredHeaders(t *testing.T, f storedFailure, want []avro.Header) {
	t.Helper()
	if len(f.HeaderNames) != len(want) || len(f.HeaderValues) != len(want) {
		t.Fatalf("stored headers %q / %q, want %v", f.HeaderNames, f.HeaderValues, want)
	}
	for i, h := range want {
		if f.HeaderNames[i] != h.Name || !sameBytes(f.HeaderValues[i], h.Value) {
			t.Errorf("header %d = %q:%q, want %q:%q", i, f.HeaderNames[i], f.HeaderValues[i], h.Name, h.Value)
		}
	}
}

func TestIntakeVectors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Writers = 3 }) // one per partition
	files, err := filepath.Glob("../avro/testdata/vectors/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var values [][]byte
	var want []*avro.Event
	for _, f := range files {
		if filepath.Base(f) == "fingerprints.json" {
			continue
		}
		js, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := avro.ParseEventJSON(js)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want = append(want, ev)
		base := strings.TrimSuffix(f, ".json")
		for _, framing := range []string{".single.bin", ".confluent7.bin"} { // the same event twice
			b, err := os.ReadFile(base + framing)
			if err != nil {
				t.Fatal(err)
			}
			values = append(values, b)
		}
	}
	if len(want) == 0 {
		t.Fatal("no vectors")
	}
	e.produce(values...)
	e.start()
	e.waitFor("offsets committed", e.committedAll)
	if n := e.rows(); n != len(want) {
		t.Fatalf("%d rows for %d distinct events", n, len(want))
	}
	if d := e.counter(e.intake.metrics.duplicates); d != float64(len(want)) {
		t.Errorf("duplicates metric %v, want %d", d, len(want))
	}
	for _, ev := range want {
		f := e.failure(ev.Identity.IdempotenceID)
		p := ev.Payload
		if f.Topic != ev.References.Message.TopicName || f.Partition != ev.References.Message.Partition ||
			f.Offset != ev.References.Message.Offset || !sameBytes(f.Key, p.OriginalKey) ||
			!bytes.Equal(f.Value, p.OriginalMessage) || f.Message != p.ErrorMessage || f.Code != ev.References.ErrorType.Code {
			t.Errorf("%s stored as %+v, want the event's fields", ev.Identity.IdempotenceID, f)
		}
		hs, err := p.FailedMessageMetadata.OriginalHeaders()
		if err != nil {
			t.Fatal(err)
		}
		checkStoredHeaders(t, f, hs)
		wantState := "PERMANENT"
		if ev.References.ErrorType.Temporality == avro.Temporary {
			wantState = "RETRY_PENDING"
		}
		if f.State != wantState || f.Temporality != string(ev.References.ErrorType.Temporality) || f.Attempt != 1 {
			t.Errorf("%s: state %s temporality %s attempt %d, want %s %s 1", ev.Identity.IdempotenceID, f.State, f.Temporality,
				f.Attempt, wantState, ev.References.ErrorType.Temporality)
		}
	}
	if n := e.counter(e.intake.metrics.ingested.WithLabelValues("TEMPORARY", "shipments.v1", "shipping")); n != 1 {
		t.Errorf("ingested{TEMPORARY,shipments.v1,shipping} = %v, want 1", n)
	}
	if err := e.intake.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
}

func TestIntakeExactHeadersStatesAndAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	headers := []avro.Header{
		{Name: "trace", Value: []byte("a")}, {Name: "nil", Value: nil}, {Name: "trace", Value: []byte{}},
		{Name: "bin", Value: []byte{0, 0xff, 0xfe}}, {Name: "trace", Value: []byte("c")},
	}
	// Four failures of one message (metadata eventId) and one of another, over two batches.
	var evs []*avro.Event
	for i, temp := range []avro.Temporality{avro.Temporary, avro.Temporary, avro.Permanent, avro.Temporary, avro.Unknown} {
		ev := event(temp)
		ev.Payload.OriginalKey = []byte{0, byte(i)}
		ev.Payload.OriginalMessage = []byte{0xc3, 0x01, byte(i), 0}
		ev.Payload.FailedMessageMetadata = &avro.Metadata{EventID: avro.Ptr("message-1"), MessageTypeName: avro.Ptr("Order")}
		if i == 4 {
			ev.Payload.FailedMessageMetadata.EventID = avro.Ptr("message-2")
		}
		if err := ev.Payload.FailedMessageMetadata.SetHeaders(headers); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	// One partition keeps the order of the failures, as the MPFE key does in production.
	produceOrdered := func(evs ...*avro.Event) {
		msgs := make([]*kafka.Message, len(evs))
		for i, ev := range evs {
			topic := errorTopic
			msgs[i] = &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: e.encode(ev)}
		}
		e.kafka.Produce(t, msgs...)
	}
	produceOrdered(evs[:2]...)
	e.start()
	e.waitFor("first batch", func() bool { return e.rows() == 2 && e.committedAll() })
	produceOrdered(evs[2:]...)
	e.waitFor("second batch", func() bool { return e.rows() == 5 && e.committedAll() })

	want := []struct {
		state   string
		attempt int
	}{{"RETRY_PENDING", 1}, {"RETRY_PENDING", 2}, {"PERMANENT", 3}, {"PERMANENT", 4}, {"PERMANENT", 1}}
	for i, ev := range evs {
		f := e.failure(ev.Identity.IdempotenceID)
		checkStoredHeaders(t, f, headers)
		if !sameBytes(f.Key, ev.Payload.OriginalKey) || !sameBytes(f.Value, ev.Payload.OriginalMessage) {
			t.Errorf("event %d: key %x value %x, want %x %x", i, f.Key, f.Value, ev.Payload.OriginalKey, ev.Payload.OriginalMessage)
		}
		if f.State != want[i].state || f.Attempt != want[i].attempt {
			t.Errorf("event %d: %s attempt %d, want %s attempt %d", i, f.State, f.Attempt, want[i].state, want[i].attempt)
		}
		if f.State == "RETRY_PENDING" && f.NextAttemptAt == nil {
			t.Errorf("event %d: RETRY_PENDING without next_attempt_at", i)
		}
		if f.MessageType == nil || *f.MessageType != "Order" {
			t.Errorf("event %d: message_type %v", i, f.MessageType)
		}
	}
}

func TestIntakeDuplicateDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Writers = 1 })
	ev := event(avro.Temporary)
	b := e.encode(ev)
	e.produce(b, b, b)
	e.start()
	e.waitFor("offsets committed", e.committedAll)
	e.produce(b) // delivered again later, in another batch
	e.waitFor("offsets committed", e.committedAll)
	if n := e.rows(); n != 1 {
		t.Fatalf("%d rows for one event delivered 4 times", n)
	}
	if f := e.failure(ev.Identity.IdempotenceID); f.Attempt != 1 {
		t.Errorf("attempt %d after duplicates, want 1", f.Attempt)
	}
	if d := e.counter(e.intake.metrics.duplicates); d != 3 {
		t.Errorf("duplicates metric %v, want 3", d)
	}
}

// A crash after the database commit and before the offset commit leaves the rows stored and
// the offsets uncommitted: the records come again and are absorbed as duplicates.
func TestIntakeRedeliveryAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var values [][]byte
	var batch []store.Incoming
	for i := 0; i < 20; i++ {
		ev := event(avro.Temporary)
		ev.References.Message.Offset = int64(i) // 20 causing messages
		values = append(values, e.encode(ev))
		batch = append(batch, store.Incoming{Event: ev})
	}
	e.produce(values...)
	// The instance that crashed had written the batch.
	if _, err := e.store.Ingest(context.Background(), batch, next); err != nil {
		t.Fatal(err)
	}
	if e.committedSum() != 0 {
		t.Fatal("offsets committed before the intake ran")
	}
	e.start()
	e.waitFor("offsets committed", e.committedAll)
	if n := e.rows(); n != 20 {
		t.Fatalf("%d rows, want 20", n)
	}
	if d := e.counter(e.intake.metrics.duplicates); d != 20 {
		t.Errorf("duplicates metric %v, want 20", d)
	}
	var maxAttempt int
	if err := e.pool.QueryRow(context.Background(), "SELECT max(attempt) FROM failures").Scan(&maxAttempt); err != nil {
		t.Fatal(err)
	}
	if maxAttempt != 1 {
		t.Errorf("redelivery counted as attempts: max attempt %d", maxAttempt)
	}
}

func TestIntakeGracefulShutdown(t *testing.T) {
	t.Parallel()
	polled := make(chan struct{})
	e := newEnv(t, func(c *Config) { c.BatchWait = time.Hour }) // the batch is only ever cut by the shutdown
	e.intake.polled = func(n int) {
		if n == 5 {
			close(polled)
		}
	}
	var values [][]byte
	for i := 0; i < 5; i++ {
		values = append(values, e.encode(event(avro.Permanent)))
	}
	e.produce(values...)
	e.start()
	select {
	case <-polled:
	case <-time.After(waitLimit):
		t.Fatal("the intake did not poll the records")
	}
	if n := e.rows(); n != 0 {
		t.Fatalf("%d rows before the batch was cut", n)
	}
	if err := e.stopIntake(); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	if n := e.rows(); n != 5 {
		t.Errorf("%d rows after shutdown, want the 5 of the batch in flight", n)
	}
	if !e.committedAll() {
		t.Errorf("batch in flight not committed at shutdown: committed %v, end %v",
			e.kafka.CommittedOffsets(e.group, errorTopic), e.kafka.EndOffsets(errorTopic))
	}
	if err := e.intake.Ready(); err == nil {
		t.Error("Ready = nil after Run returned")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	cases := map[string]Config{
		"empty":            {},
		"same topics":      {NextAttempt: next, Bootstrap: "x", Topic: "errors", DeadLetterTopic: "errors"},
		"negative batch":   {NextAttempt: next, Bootstrap: "x", Topic: "a", DeadLetterTopic: "b", BatchSize: -1},
		"too many writers": {NextAttempt: next, Bootstrap: "x", Topic: "a", DeadLetterTopic: "b", Writers: MaxWriters + 1},
		"retry bounds":     {NextAttempt: next, Bootstrap: "x", Topic: "a", DeadLetterTopic: "b", RetryMin: time.Second, RetryMax: time.Millisecond},
		"owned kafka keys": {NextAttempt: next, Bootstrap: "x", Topic: "a", DeadLetterTopic: "b", ConsumerConfig: kafka.ConfigMap{"enable.auto.commit": true}},
		"instance id key":  {NextAttempt: next, Bootstrap: "x", Topic: "a", DeadLetterTopic: "b", ConsumerConfig: kafka.ConfigMap{"group.instance.id": "i"}},
		"instance id":      {NextAttempt: next, Bootstrap: "x", Topic: "a", DeadLetterTopic: "b", GroupInstanceID: " i"},
	}
	for name, cfg := range cases {
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), "invalid config") {
			t.Errorf("%s: New = %v, want an invalid config error", name, err)
		}
	}
	_, err := New(Config{Topic: "errors", DeadLetterTopic: "errors"})
	if err == nil || !strings.Contains(err.Error(), "DeadLetterTopic") {
		t.Errorf("same topics: %v does not name DeadLetterTopic", err)
	}
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start()
	e.waitFor("running", func() bool { return e.intake.Ready() == nil })
	if err := e.intake.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run = %v", err)
	}
}
