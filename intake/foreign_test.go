package intake

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// The builders below write the headers the way the Java code writes them.

func be32(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
func be64(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// springFailure is one failure as Spring Kafka's DeadLetterPublishingRecoverer records it.
type springFailure struct {
	topic           string
	partition       int32
	offset          int64
	timestamp       int64
	group           string
	fqcn, causeFQCN string
	message, trace  string
	keyFailure      bool // the key failed to deserialize: key-exception headers instead
}

// headers returns the headers Spring appends for f, in its order.
func (f springFailure) headers() []avro.Header {
	hs := []avro.Header{
		{Name: springTopic, Value: []byte(f.topic)},
		{Name: springPartition, Value: be32(f.partition)},
		{Name: springOffset, Value: be64(f.offset)},
		{Name: springTimestamp, Value: be64(f.timestamp)},
		{Name: springTimestampType, Value: []byte("CreateTime")},
	}
	if f.group != "" {
		hs = append(hs, avro.Header{Name: springGroup, Value: []byte(f.group)})
	}
	if f.keyFailure {
		return append(hs,
			avro.Header{Name: springKeyFQCN, Value: []byte(f.fqcn)},
			avro.Header{Name: springKeyMessage, Value: []byte(f.message)},
			avro.Header{Name: springKeyStackTrace, Value: []byte(f.trace)})
	}
	hs = append(hs, avro.Header{Name: springFQCN, Value: []byte(f.fqcn)})
	if f.causeFQCN != "" {
		hs = append(hs, avro.Header{Name: springCauseFQCN, Value: []byte(f.causeFQCN)})
	}
	return append(hs,
		avro.Header{Name: springMessage, Value: []byte(f.message)},
		avro.Header{Name: springStackTrace, Value: []byte(f.trace)})
}

// connectHeaders returns the context headers of Kafka Connect's DeadLetterQueueReporter; a nil
// message is a null header value (Throwable.getMessage() was null).
func connectHeaders(topic string, partition int32, offset int64, connector string, exc string, message *string, trace string) []avro.Header {
	var msg []byte
	if message != nil {
		msg = []byte(*message)
	}
	return []avro.Header{
		{Name: connectTopic, Value: []byte(topic)},
		{Name: connectPartition, Value: []byte(strconv.Itoa(int(partition)))},
		{Name: connectOffset, Value: []byte(strconv.FormatInt(offset, 10))},
		{Name: connectConnector, Value: []byte(connector)},
		{Name: connectTask, Value: []byte("0")},
		{Name: connectStage, Value: []byte("VALUE_CONVERTER")},
		{Name: connectClass, Value: []byte("org.apache.kafka.connect.json.JsonConverter")},
		{Name: connectException, Value: []byte(exc)},
		{Name: connectMessage, Value: msg},
		{Name: connectStackTrace, Value: []byte(trace)},
	}
}

// streamsHeaders returns the headers of a Kafka Streams dead-letter record (KIP-1034); a nil
// message is a null header value.
func streamsHeaders(topic string, partition int32, offset int64, exc string, message *string, trace string) []avro.Header {
	toString := exc
	var msg []byte
	if message != nil {
		toString += ": " + *message
		msg = []byte(*message)
	}
	return []avro.Header{
		{Name: streamsException, Value: []byte(toString)},
		{Name: streamsMessage, Value: msg},
		{Name: streamsStackTrace, Value: []byte(trace)},
		{Name: streamsTopic, Value: []byte(topic)},
		{Name: streamsPartition, Value: []byte(strconv.Itoa(int(partition)))},
		{Name: streamsOffset, Value: []byte(strconv.FormatInt(offset, 10))},
	}
}

const javaTrace = `java.lang.IllegalStateException: order 17 has no lines
	at com.shop.orders.OrderListener.lambda$onOrder$0(OrderListener.java:42)
	at com.shop.orders.OrderListener$$Lambda$812/0x0000000800c4b440.accept(Unknown Source)
	at com.sun.proxy.$Proxy123.onOrder(Unknown Source)
	at com.shop.orders.OrderService$$EnhancerBySpringCGLIB$$5f3a1b2c.handle(<generated>)
	at jdk.internal.reflect.GeneratedMethodAccessor57.invoke(Unknown Source)
	at java.base@17.0.2/java.lang.Thread.run(Thread.java:833)
Caused by: java.lang.NumberFormatException: For input string: "x17"
	at java.base/java.lang.Integer.parseInt(Integer.java:652)
	... 12 more`

func TestStackTraceHashNormalises(t *testing.T) {
	t.Parallel()
	other := strings.NewReplacer(
		"order 17", "order 99", ":42)", ":44)", "$812/0x0000000800c4b440", "$90/0x00000008000a1000",
		"$Proxy123", "$Proxy7", "5f3a1b2c", "77aa88bb", "Accessor57", "Accessor3", "@17.0.2", "@21.0.1",
		`"x17"`, `"y"`, "... 12 more", "... 3 more", ":833)", ":1583)", ":652)", ":614)",
	).Replace(javaTrace)
	if other == javaTrace {
		t.Fatal("the variant equals the original")
	}
	h1, h2 := stackTraceHash(javaTrace), stackTraceHash(other)
	if h1 == nil || h2 == nil || *h1 != *h2 {
		t.Errorf("one bug, two hashes:\n%v\n%v", normaliseStackTrace(javaTrace), normaliseStackTrace(other))
	}
	differentBug := strings.Replace(javaTrace, "OrderListener.lambda$onOrder$0", "OrderListener.validate", 1)
	if h3 := stackTraceHash(differentBug); *h3 == *h1 {
		t.Error("another frame gives the same hash")
	}
	if stackTraceHash("") != nil || stackTraceHash("\n \n") != nil {
		t.Error("an empty trace has a hash")
	}
}

func TestParseSpring(t *testing.T) {
	t.Parallel()
	first := springFailure{topic: "orders", partition: 3, offset: 1 << 40, timestamp: 1780000000123, group: "order-service",
		fqcn: "org.springframework.kafka.listener.ListenerExecutionFailedException", causeFQCN: "java.lang.IllegalStateException",
		message: "Listener failed; order 17 has no lines", trace: javaTrace}
	fi, err := parseSpring(append([]avro.Header{{Name: "traceparent", Value: []byte("00-ab")}}, first.headers()...))
	if err != nil {
		t.Fatal(err)
	}
	if fi.topic != "orders" || fi.partition != 3 || fi.offset != 1<<40 || fi.publisher != "order-service" ||
		fi.exception != "java.lang.IllegalStateException" || fi.message != first.message || fi.stackTrace != javaTrace {
		t.Errorf("parseSpring = %+v", fi)
	}

	// Dead-lettered twice: the set twice, the last describes the latest failure.
	second := first
	second.fqcn, second.causeFQCN, second.message = "java.lang.ArithmeticException", "", "/ by zero"
	fi, err = parseSpring(append(first.headers(), second.headers()...))
	if err != nil {
		t.Fatal(err)
	}
	if fi.exception != "java.lang.ArithmeticException" || fi.message != "/ by zero" {
		t.Errorf("latest failure = %q %q", fi.exception, fi.message)
	}
	if d := strings.Join(fi.details, "\n"); !strings.Contains(d, "earlier failure 1 of 2: org.springframework.kafka.listener.ListenerExecutionFailedException: Listener failed") {
		t.Errorf("history missing: %s", d)
	}

	key := springFailure{topic: "orders", partition: 0, offset: 5, timestamp: 1, fqcn: "org.apache.kafka.common.errors.SerializationException",
		message: "bad key", trace: "x", keyFailure: true}
	if fi, err = parseSpring(key.headers()); err != nil || fi.exception != key.fqcn || fi.message != "bad key" {
		t.Errorf("key failure = %+v, %v", fi, err)
	}
}

func TestParseForeignMalformed(t *testing.T) {
	t.Parallel()
	ok := springFailure{topic: "orders", partition: 1, offset: 2, timestamp: 3, fqcn: "a.B", message: "m", trace: "t"}.headers()
	replace := func(hs []avro.Header, name string, v []byte) []avro.Header {
		out := make([]avro.Header, 0, len(hs))
		for _, h := range hs {
			if h.Name == name {
				if v == nil {
					continue
				}
				h.Value = v
			}
			out = append(out, h)
		}
		return out
	}
	msg := "boom"
	conn := connectHeaders("payments", 0, 9, "jdbc-sink", "org.apache.kafka.connect.errors.DataException", &msg, "t")
	str := streamsHeaders("clicks", 2, 10, "org.apache.kafka.common.errors.SerializationException", &msg, "t")
	cases := []struct {
		name   string
		src    Source
		hs     []avro.Header
		header string
		reason string
	}{
		{"spring partition 3 bytes", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springPartition, []byte{0, 0, 1}), springPartition, "3 bytes"},
		{"spring offset 4 bytes", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springOffset, be32(1)), springOffset, "4 bytes"},
		{"spring negative offset", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springOffset, be64(-5)), springOffset, "negative"},
		{"spring timestamp 2 bytes", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springTimestamp, []byte{1, 2}), springTimestamp, "2 bytes"},
		{"spring no partition", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springPartition, nil), springPartition, "missing"},
		{"spring no topic", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springTopic, nil), springTopic, "missing, and the source configures no original topic"},
		{"spring bad topic name", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springTopic, []byte("a b")), springTopic, "has the character"},
		{"spring topic not UTF-8", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springTopic, []byte{0xff, 0xfe}), springTopic, "not valid UTF-8"},
		{"spring message not UTF-8", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springMessage, []byte("a\xc3")), springMessage, "not valid UTF-8"},
		{"spring trace with NUL", Source{Format: redrive.SourceSpring, Topic: "o.DLT"}, replace(ok, springStackTrace, []byte("a\x00b")), springStackTrace, "NUL"},
		{"connect offset not numeric", Source{Format: redrive.SourceConnect, Topic: "c.dlq"}, replace(conn, connectOffset, []byte("12a")), connectOffset, `"12a" is not a decimal`},
		{"connect partition too large", Source{Format: redrive.SourceConnect, Topic: "c.dlq"}, replace(conn, connectPartition, []byte("4294967296")), connectPartition, "not a decimal"},
		{"connect no offset", Source{Format: redrive.SourceConnect, Topic: "c.dlq"}, replace(conn, connectOffset, nil), connectOffset, "missing"},
		{"connect without context headers", Source{Format: redrive.SourceConnect, Topic: "c.dlq"}, nil, connectTopic, "no original topic"},
		{"streams partition negative", Source{Format: redrive.SourceStreams, Topic: "s.dlq"}, replace(str, streamsPartition, []byte("-1")), streamsPartition, "not a decimal"},
		{"streams trace not UTF-8", Source{Format: redrive.SourceStreams, Topic: "s.dlq"}, replace(str, streamsStackTrace, []byte{0x80}), streamsStackTrace, "UTF-8"},
		{"streams no topic", Source{Format: redrive.SourceStreams, Topic: "s.dlq"}, replace(str, streamsTopic, nil), streamsTopic, "missing"},
	}
	for _, tt := range cases {
		_, err := tt.src.foreignIncoming(&dltRecord{Topic: tt.src.Topic, Value: []byte("v"), Headers: tt.hs}, time.Now())
		var he *HeaderError
		if !errors.As(err, &he) || !errors.Is(err, ErrBadHeader) || !strings.HasPrefix(he.Header, tt.header) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: %v, want a header error on %s with %q", tt.name, err, tt.header, tt.reason)
		}
	}
}

func TestForeignIncoming(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	src := Source{Format: redrive.SourceSpring, Topic: "orders.DLT", Temporality: avro.Temporary}
	f := springFailure{topic: "orders", partition: 3, offset: 77, timestamp: 1, group: "order-service",
		fqcn: "java.lang.IllegalStateException", message: "no lines", trace: javaTrace}
	r := &dltRecord{Topic: "orders.DLT", Partition: 1, Offset: 5, Key: nil, Value: nil, Headers: f.headers(), Timestamp: now.Add(-time.Hour)}
	in, err := src.foreignIncoming(r, now)
	if err != nil {
		t.Fatal(err)
	}
	e := in.Event
	if e.Identity.IdempotenceID != foreignIdentity(redrive.SourceSpring, "orders.DLT", 1, 5) || e.References.Message.TopicName != "orders" ||
		e.References.Message.Partition != 3 || e.References.Message.Offset != 77 || e.References.ErrorType.Code != "IllegalStateException" ||
		e.References.ErrorType.Temporality != avro.Temporary || e.Publisher.Service != "order-service" || e.Publisher.System != "spring-kafka" ||
		e.Payload.ErrorMessage != "no lines" || *e.Payload.StackTraceHash != *stackTraceHash(javaTrace) || !e.Identity.Created.Equal(now.Add(-time.Hour)) {
		t.Errorf("event = %+v", e)
	}
	if !in.ValueNull || e.Payload.OriginalKey != nil || in.Source != (redrive.Source{Format: redrive.SourceSpring, Topic: "orders.DLT", Partition: 1, Offset: 5}) {
		t.Errorf("incoming: null %v, key %v, source %+v", in.ValueNull, e.Payload.OriginalKey, in.Source)
	}
	if _, err := store.Prepare(in); err != nil {
		t.Errorf("Prepare: %v", err)
	}

	// A timestamp Postgres cannot keep is replaced by the time of reading.
	far := &dltRecord{Topic: "orders.DLT", Offset: 6, Value: []byte("v"), Headers: f.headers(), Timestamp: time.UnixMilli(1 << 62)}
	if in, err := src.foreignIncoming(far, now); err != nil || !in.Event.Identity.Created.Equal(now) {
		t.Errorf("far timestamp: created %v, %v", in.Event.Identity.Created, err)
	} else if _, err := store.Prepare(in); err != nil {
		t.Errorf("far timestamp: Prepare: %v", err)
	}

	// A configured code and publisher win; raw records have an unknown position.
	raw := Source{Format: redrive.SourceRaw, Topic: "orders.DLQ", OriginalTopic: "orders", ErrorCode: "MANUAL_DLQ", PublisherService: "orders-team"}
	in, err = raw.foreignIncoming(&dltRecord{Topic: "orders.DLQ", Partition: 0, Offset: 9, Value: []byte{}}, now)
	if err != nil {
		t.Fatal(err)
	}
	m := in.Event.References.Message
	if m.TopicName != "orders" || m.Partition != redrive.UnknownPosition || m.Offset != redrive.UnknownPosition ||
		in.Event.References.ErrorType.Code != "MANUAL_DLQ" || in.Event.Publisher.Service != "orders-team" || in.ValueNull {
		t.Errorf("raw = %+v, null %v", in.Event, in.ValueNull)
	}
	p, err := store.Prepare(in)
	if err != nil || p.CausingMessage() != "orders.DLQ/0/9" {
		t.Errorf("raw causing message %q, %v", p.CausingMessage(), err)
	}

	// Streams with a null message header.
	st := Source{Format: redrive.SourceStreams, Topic: "clicks.dlq"}
	in, err = st.foreignIncoming(&dltRecord{Topic: "clicks.dlq", Offset: 1, Value: []byte{0xff, 0x00},
		Headers: streamsHeaders("clicks", 0, 4, "java.lang.NullPointerException", nil, "java.lang.NullPointerException\n\tat a.B.c(B.java:1)")}, now)
	if err != nil {
		t.Fatal(err)
	}
	if in.Event.References.ErrorType.Code != "NullPointerException" || in.Event.Payload.ErrorMessage != "java.lang.NullPointerException" ||
		in.Event.Publisher.Service != "clicks.dlq" || !strings.Contains(*in.Event.Payload.ErrorDescription, "does not keep the original headers") {
		t.Errorf("streams = %+v", in.Event)
	}

	// Connect without context headers, with a configured original topic.
	cn := Source{Format: redrive.SourceConnect, Topic: "sink.dlq", OriginalTopic: "payments"}
	in, err = cn.foreignIncoming(&dltRecord{Topic: "sink.dlq", Offset: 2, Value: []byte("{}")}, now)
	if err != nil || in.Event.References.Message.TopicName != "payments" || in.Event.References.Message.Offset != redrive.UnknownPosition {
		t.Errorf("connect without context headers = %+v, %v", in.Event, err)
	}
}

func TestTraceHashesRemember(t *testing.T) {
	t.Parallel()
	c := &traceHashes{}
	if h := c.hash(javaTrace); *h != *stackTraceHash(javaTrace) {
		t.Error("remembered hash differs")
	}
	if h := c.hash(javaTrace); *h != *stackTraceHash(javaTrace) || len(c.hashes) != 1 {
		t.Errorf("second look-up: %d remembered", len(c.hashes))
	}
	for i := range maxTraceHashes {
		c.hash(javaTrace + strconv.Itoa(i))
	}
	if len(c.hashes) > maxTraceHashes {
		t.Errorf("%d remembered, bound %d", len(c.hashes), maxTraceHashes)
	}
	var none *traceHashes
	if h := none.hash(javaTrace); *h != *stackTraceHash(javaTrace) {
		t.Error("nil cache")
	}
}
