package intake

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// Foreign dead-letter topics of the source tests.
const (
	springDLT   = "orders.DLT"
	connectDLQ  = "sink.dlq"
	connect2DLQ = "sink2.dlq"
	streamsDLQ  = "clicks.dlq"
	rawDLQ      = "orders.DLQ"
)

var testSources = []Source{
	{Format: redrive.SourceSpring, Topic: springDLT, Temporality: avro.Temporary},
	{Format: redrive.SourceConnect, Topic: connectDLQ},
	{Format: redrive.SourceConnect, Topic: connect2DLQ, OriginalTopic: "payments"},
	{Format: redrive.SourceStreams, Topic: streamsDLQ, PublisherService: "click-counter"},
	{Format: redrive.SourceRaw, Topic: rawDLQ, OriginalTopic: "orders", ErrorCode: "MANUAL"},
}

// newSourcesEnv is an intake env that reads the test sources too.
func newSourcesEnv(t *testing.T, cfg func(*Config)) *env {
	t.Helper()
	e := newEnv(t, func(c *Config) {
		c.Sources = testSources
		if cfg != nil {
			cfg(c)
		}
	})
	for _, s := range testSources {
		e.kafka.CreateTopic(t, s.Topic, 2)
	}
	return e
}

func kafkaHeaders(hs []avro.Header) []kafka.Header {
	out := make([]kafka.Header, len(hs))
	for i, h := range hs {
		out[i] = kafka.Header{Key: h.Name, Value: h.Value}
	}
	return out
}

// committedTopics reports whether the group committed the end of every partition of the topics.
func (e *env) committedTopics(group string, topics ...string) bool {
	for _, topic := range topics {
		end := e.kafka.EndOffsets(topic)
		got := e.kafka.CommittedOffsets(group, topic)
		for p, o := range end {
			if o > 0 && got[p] != o {
				return false
			}
		}
	}
	return true
}

func allSourceTopics() []string {
	ts := []string{errorTopic}
	for _, s := range testSources {
		ts = append(ts, s.Topic)
	}
	return ts
}

func TestIntakeForeignSources(t *testing.T) {
	t.Parallel()
	e := newSourcesEnv(t, nil)
	notUTF8 := []byte{0xff, 0x00, 0xfe, 'x'}
	orig := []avro.Header{{Name: "traceparent", Value: []byte("00-1")}, {Name: "dup", Value: []byte("a")}, {Name: "nil", Value: nil}, {Name: "dup", Value: []byte("b")}}
	first := springFailure{topic: "orders", partition: 1, offset: 100, timestamp: 1780000000000, group: "order-service",
		fqcn: "org.springframework.kafka.listener.ListenerExecutionFailedException", causeFQCN: "java.lang.IllegalStateException",
		message: "order 17 has no lines", trace: javaTrace}
	second := first
	second.offset, second.fqcn, second.causeFQCN, second.message = 200, "java.lang.ArithmeticException", "", "/ by zero"
	with := func(hs []avro.Header, name string, v []byte) []avro.Header {
		out := []avro.Header{}
		for _, h := range hs {
			if h.Name == name {
				if v == nil {
					continue // left out
				}
				h.Value = v
			}
			out = append(out, h)
		}
		return out
	}
	// The tombstone and the empty record are failures of other messages than first: records
	// of one causing message count its attempts in the order they are stored, which across
	// partitions is not the order they were produced in.
	tombstone, empty := first, first
	tombstone.offset, empty.offset = 101, 102
	badPartition := with(first.headers(), springPartition, []byte{0, 1})
	streamsOK := streamsHeaders("clicks", 0, 3, "java.lang.IllegalStateException", nil, "t")
	msg := "Converting byte[] to Kafka Connect data failed"

	type rec struct {
		name     string
		topic    string
		key, val []byte
		hs       []avro.Header
		badCheck string // "" for a record that is stored
		header   string // the header a bad record's reason names
	}
	recs := []rec{
		{name: "spring", topic: springDLT, key: nil, val: notUTF8, hs: append(append([]avro.Header{}, orig...), first.headers()...)},
		{name: "spring tombstone", topic: springDLT, key: []byte("k-1"), val: nil, hs: tombstone.headers()},
		{name: "spring twice", topic: springDLT, key: []byte("k-2"), val: []byte("v"), hs: append(append(append([]avro.Header{}, orig...), first.headers()...), second.headers()...)},
		{name: "spring empty", topic: springDLT, key: []byte{}, val: []byte{}, hs: empty.headers()},
		{name: "spring bad partition", topic: springDLT, key: []byte("k-3"), val: []byte("v"), hs: badPartition, badCheck: "bad spring header", header: springPartition},
		{name: "connect", topic: connectDLQ, key: []byte("c"), val: []byte("{"), hs: append(append([]avro.Header{}, orig...),
			connectHeaders("payments", 0, 7, "jdbc-sink", "org.apache.kafka.connect.errors.DataException", nil, "org.apache.kafka.connect.errors.DataException: x\n\tat a.B.c(B.java:1)")...)},
		{name: "connect no context", topic: connectDLQ, key: []byte("c2"), val: []byte("{"), hs: orig, badCheck: "bad connect header", header: connectTopic},
		{name: "connect2 no context", topic: connect2DLQ, key: []byte("c3"), val: []byte("{"), hs: orig},
		{name: "connect2 with context", topic: connect2DLQ, key: []byte("c4"), val: []byte("{"), hs: connectHeaders("payments", 1, 8, "jdbc-sink", "x.Y", &msg, "t")},
		{name: "streams", topic: streamsDLQ, key: nil, val: notUTF8, hs: streamsHeaders("clicks", 0, 3, "org.apache.kafka.common.errors.SerializationException", nil, "t\n\tat a.B.c(B.java:9)")},
		{name: "raw", topic: rawDLQ, key: []byte("r"), val: []byte("raw value"), hs: orig},
		{name: "spring offset of 4 bytes", topic: springDLT, val: []byte("v"), hs: with(first.headers(), springOffset, be32(7)),
			badCheck: "bad spring header", header: springOffset},
		{name: "spring topic not UTF-8", topic: springDLT, val: nil, hs: with(first.headers(), springTopic, []byte{0xc3, 0x28}),
			badCheck: "bad spring header", header: springTopic},
		{name: "spring unknown original topic", topic: springDLT, val: []byte("v"), hs: with(first.headers(), springTopic, nil),
			badCheck: "bad spring header", header: springTopic},
		{name: "connect offset not numeric", topic: connectDLQ, val: []byte("v"),
			hs: with(connectHeaders("payments", 0, 7, "jdbc-sink", "x.Y", nil, "t"), connectOffset, []byte("7x")), badCheck: "bad connect header", header: connectOffset},
		{name: "streams negative partition", topic: streamsDLQ, val: []byte("v"), hs: with(streamsOK, streamsPartition, []byte("-1")),
			badCheck: "bad streams header", header: streamsPartition},
		{name: "streams trace not UTF-8", topic: streamsDLQ, val: []byte("v"), hs: with(streamsOK, streamsStackTrace, []byte{0xff}),
			badCheck: "bad streams header", header: streamsStackTrace},
	}
	msgs := make([]*kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = testkit.Message(r.topic, r.key, r.val, kafkaHeaders(r.hs)...)
	}
	delivered := e.kafka.Produce(t, msgs...)
	e.start()
	e.waitFor("offsets committed", func() bool { return e.committedTopics(e.group, allSourceTopics()...) })

	ctx := context.Background()
	stored := 0
	for i, r := range recs {
		if r.badCheck != "" {
			continue
		}
		stored++
		m := delivered[i]
		id := foreignIdentity(sourceOf(r.topic).Format, r.topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))
		var fid uuid.UUID
		if err := e.pool.QueryRow(ctx, `SELECT id FROM failures WHERE idempotence_id = $1`, id).Scan(&fid); err != nil {
			t.Errorf("%s: not stored: %v", r.name, err)
			continue
		}
		d, err := e.store.FailureByID(ctx, fid)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Key, r.key) || (d.Key == nil) != (r.key == nil) {
			t.Errorf("%s: key %q, want %q", r.name, d.Key, r.key)
		}
		if !bytes.Equal(d.Value, r.val) || d.ValueNull != (r.val == nil) {
			t.Errorf("%s: value %q (null %v), want %q", r.name, d.Value, d.ValueNull, r.val)
		}
		if fmt.Sprint(d.Headers) != fmt.Sprint(r.hs) {
			t.Errorf("%s: headers\n%v\nwant\n%v", r.name, d.Headers, r.hs)
		}
		if d.SourceFormat != sourceOf(r.topic).Format || d.SourceTopic == nil || *d.SourceTopic != r.topic ||
			*d.SourcePartition != m.TopicPartition.Partition || *d.SourceOffset != int64(m.TopicPartition.Offset) {
			t.Errorf("%s: source %q %v", r.name, d.SourceFormat, d.SourceTopic)
		}
		switch r.name {
		case "spring":
			if d.Topic != "orders" || d.Partition != 1 || d.Offset != 100 || d.ErrorCode != "IllegalStateException" ||
				d.PublisherService != "order-service" || d.Temporality != avro.Temporary || d.State != redrive.StateRetryPending ||
				d.CausingMessage != "orders/1/100" {
				t.Errorf("spring row: %+v", d.Failure)
			}
		case "spring twice":
			if d.ErrorCode != "ArithmeticException" || d.Offset != 200 || !strings.Contains(*d.ErrorDescription, "earlier failure 1 of 2") {
				t.Errorf("spring twice: %s %d %q", d.ErrorCode, d.Offset, *d.ErrorDescription)
			}
		case "connect":
			if d.Topic != "payments" || d.Offset != 7 || d.ErrorCode != "DataException" || d.PublisherService != "jdbc-sink" ||
				d.ErrorMessage != "org.apache.kafka.connect.errors.DataException" || d.State != redrive.StatePermanent {
				t.Errorf("connect row: %+v", d.Failure)
			}
		case "connect2 no context":
			if d.Topic != "payments" || d.Partition != redrive.UnknownPosition || d.Offset != redrive.UnknownPosition {
				t.Errorf("connect without context headers: %s/%d/%d", d.Topic, d.Partition, d.Offset)
			}
		case "streams":
			if d.Topic != "clicks" || d.ErrorCode != "SerializationException" || d.PublisherService != "click-counter" {
				t.Errorf("streams row: %+v", d.Failure)
			}
		case "raw":
			if d.Topic != "orders" || d.ErrorCode != "MANUAL" || d.Offset != redrive.UnknownPosition ||
				d.CausingMessage != redrive.TopicPartitionOffset(rawDLQ, m.TopicPartition.Partition, int64(m.TopicPartition.Offset)) {
				t.Errorf("raw row: %+v", d.Failure)
			}
		}
	}
	if n := e.rows(); n != stored {
		t.Errorf("%d rows, want %d", n, stored)
	}

	// The records no format makes sense of are on the own dead-letter topic, with a reason
	// that names the header.
	bad := 0
	for _, r := range recs {
		if r.badCheck != "" {
			bad++
		}
	}
	// Every record there, not only the first bad ones: a record dead-lettered again (after a
	// rebalance, before its commit) is a duplicate, which at-least-once allows.
	onDLT := 0
	for _, end := range e.kafka.EndOffsets(dltTopic) {
		onDLT += int(end)
	}
	if onDLT < bad {
		t.Errorf("%d records on the dead-letter topic, want at least %d", onDLT, bad)
	}
	out := e.kafka.ConsumeN(t, dltTopic, onDLT, waitLimit)
	reasons := map[string]*avro.Event{}
	for _, m := range out {
		ev, err := e.codec.DecodeEvent(dltTopic, m.Value)
		if err != nil {
			t.Fatal(err)
		}
		ref := ev.References.Message
		reasons[redrive.TopicPartitionOffset(ref.TopicName, ref.Partition, ref.Offset)] = ev
	}
	for i, r := range recs {
		if r.badCheck == "" {
			continue
		}
		m := delivered[i]
		ev := reasons[redrive.TopicPartitionOffset(r.topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))]
		if ev == nil {
			t.Errorf("%s: not on the dead-letter topic", r.name)
			continue
		}
		wantValue := r.val
		if len(wantValue) == 0 {
			wantValue = []byte(avro.EmptyContent)
		}
		if !strings.Contains(ev.Payload.ErrorMessage, r.header) || !strings.Contains(*ev.Payload.ErrorDescription, "check: "+r.badCheck) ||
			!bytes.Equal(ev.Payload.OriginalMessage, wantValue) {
			t.Errorf("%s: dead-letter event %q / %q", r.name, ev.Payload.ErrorMessage, *ev.Payload.ErrorDescription)
		}
		if null := string(ev.Payload.FailedMessageMetadata.Headers[avro.ValueNullEntry]) == "true"; null != (r.val == nil) {
			t.Errorf("%s: dead-letter event marks a null value: %v", r.name, null)
		}
		hs, _ := ev.Payload.FailedMessageMetadata.OriginalHeaders()
		if fmt.Sprint(hs) != fmt.Sprint(r.hs) {
			t.Errorf("%s: dead-letter headers %v", r.name, hs)
		}
	}

	// Read again from the start by another group (a restart that lost its commits, a
	// rebalance): still one row per record.
	if err := e.stopIntake(); err != nil {
		t.Fatal(err)
	}
	again := newSourcesEnvOn(t, e)
	again.start()
	again.waitFor("offsets committed again", func() bool { return again.committedTopics(again.group, allSourceTopics()...) })
	if n := e.rows(); n != stored {
		t.Errorf("after reading the sources again: %d rows, want %d", n, stored)
	}
}

// newSourcesEnvOn returns a second intake, in a new group, on e's cluster and database.
func newSourcesEnvOn(t *testing.T, e *env) *env {
	t.Helper()
	c := e.intake.cfg
	c.GroupID = "again-" + uuid.NewString()[:8]
	c.Registerer = prometheus.NewRegistry()
	in, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, kafka: e.kafka, db: e.db, pool: e.pool, store: e.store, codec: e.codec, reg: e.reg, intake: in, group: c.GroupID}
}

func sourceOf(topic string) Source {
	for _, s := range testSources {
		if s.Topic == topic {
			return s
		}
	}
	return Source{Format: redrive.SourceMPFE, Topic: topic}
}

// An MPFE with the redrive-value-null entry is a tombstone: stored NULL, the entry is not a
// header. An event without it keeps the contract's meaning.
func TestDecodeMPFETombstone(t *testing.T) {
	t.Parallel()
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		t.Fatal(err)
	}
	topic := errorTopic
	for _, tt := range []struct {
		name      string
		md        *avro.Metadata
		wantNull  bool
		wantNames string
	}{
		{"map only", &avro.Metadata{Headers: map[string][]byte{avro.ValueNullEntry: []byte("true"), "h": []byte("1")}}, true, "[h]"},
		{"exact list", func() *avro.Metadata {
			md := &avro.Metadata{}
			if err := md.SetHeaders([]avro.Header{{Name: "h", Value: []byte("1")}}); err != nil {
				t.Fatal(err)
			}
			md.Headers[avro.ValueNullEntry] = []byte("true")
			return md
		}(), true, "[h]"},
		{"jEAP event", &avro.Metadata{Headers: map[string][]byte{"h": []byte("1")}}, false, "[h]"},
		{"false", &avro.Metadata{Headers: map[string][]byte{avro.ValueNullEntry: []byte("false")}}, false, "[]"},
	} {
		ev := event(avro.Permanent)
		ev.Payload.OriginalMessage = []byte{}
		ev.Payload.FailedMessageMetadata = tt.md
		b, err := codec.EncodeEvent(topic, ev)
		if err != nil {
			t.Fatal(err)
		}
		r := decodeMPFE(codec, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 2, Offset: 9}, Value: b}, "")
		if r.bad() {
			t.Fatalf("%s: %v", tt.name, r.err)
		}
		in := r.prep.Incoming()
		names := []string{}
		for _, h := range in.Headers {
			names = append(names, h.Name)
		}
		if in.ValueNull != tt.wantNull || fmt.Sprint(names) != tt.wantNames {
			t.Errorf("%s: null %v, headers %v", tt.name, in.ValueNull, names)
		}
		if in.Source != (redrive.Source{Format: redrive.SourceMPFE, Topic: topic, Partition: 2, Offset: 9}) {
			t.Errorf("%s: source %+v", tt.name, in.Source)
		}
	}
}

// An instance stored half of a Spring source's records and crashed before it committed their
// offsets: the next one reads them all again and stores only the other half.
func TestIntakeForeignRestartMidSource(t *testing.T) {
	t.Parallel()
	e := newSourcesEnv(t, nil)
	var msgs []*kafka.Message
	for i := range 60 {
		f := springFailure{topic: "orders", partition: int32(i % 3), offset: int64(i), timestamp: 1780000000000, group: "order-service",
			fqcn: "java.lang.IllegalStateException", message: fmt.Sprintf("order %d", i), trace: javaTrace}
		msgs = append(msgs, testkit.Message(springDLT, []byte(fmt.Sprintf("k-%d", i)), []byte(fmt.Sprintf("v-%d", i)), kafkaHeaders(f.headers())...))
	}
	delivered := e.kafka.Produce(t, msgs...)
	src := e.intake.sources[springDLT]
	var crashed []store.Incoming
	for _, m := range delivered[:30] {
		in, err := src.foreignIncoming(dltRecordOf(m), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		crashed = append(crashed, in)
	}
	if _, err := e.store.Ingest(context.Background(), crashed, next); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.waitFor("offsets committed", func() bool { return e.committedTopics(e.group, springDLT) })
	if n := e.rows(); n != 60 {
		t.Errorf("%d rows, want 60", n)
	}
	if d := e.counter(e.intake.metrics.duplicates); d != 30 {
		t.Errorf("duplicates %v, want the 30 stored before the crash", d)
	}
	var maxAttempt int
	if err := e.pool.QueryRow(context.Background(), "SELECT max(attempt) FROM failures").Scan(&maxAttempt); err != nil || maxAttempt != 1 {
		t.Errorf("max attempt %d, %v: a re-read counted as an attempt", maxAttempt, err)
	}
}
