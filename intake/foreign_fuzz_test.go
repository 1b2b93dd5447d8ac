package intake

import (
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// fuzzHeaderNames are the header names a fuzzed header list draws from; the last entry stands
// for a name of the fuzzer's own.
var fuzzHeaderNames = []string{
	springTopic, springPartition, springOffset, springTimestamp, springTimestampType, springGroup, springFQCN,
	springCauseFQCN, springMessage, springStackTrace, springKeyFQCN, springKeyMessage, springKeyStackTrace,
	connectTopic, connectPartition, connectOffset, connectConnector, connectTask, connectStage, connectClass,
	connectException, connectMessage, connectStackTrace,
	streamsException, streamsMessage, streamsStackTrace, streamsTopic, streamsPartition, streamsOffset,
	"",
}

// fuzzHeaders turns fuzz input into a header list: each header is a selector byte (a name of
// fuzzHeaderNames; 0xff marks a null value when it is the length byte), a length byte, and that
// many value bytes.
func fuzzHeaders(b []byte) []avro.Header {
	var hs []avro.Header
	for len(b) >= 2 {
		name := fuzzHeaderNames[int(b[0])%len(fuzzHeaderNames)]
		if name == "" {
			name = "x-custom"
		}
		n := int(b[1])
		b = b[2:]
		if n == 0xff {
			hs = append(hs, avro.Header{Name: name, Value: nil})
			continue
		}
		n = min(n, len(b))
		hs = append(hs, avro.Header{Name: name, Value: append([]byte{}, b[:n]...)})
		b = b[n:]
	}
	return hs
}

// encodeFuzzHeaders is the inverse of fuzzHeaders, for the seeds.
func encodeFuzzHeaders(hs []avro.Header) []byte {
	var b []byte
	for _, h := range hs {
		sel := len(fuzzHeaderNames) - 1
		for i, n := range fuzzHeaderNames {
			if n == h.Name {
				sel = i
			}
		}
		if h.Value == nil {
			b = append(b, byte(sel), 0xff)
			continue
		}
		v := h.Value
		if len(v) > 254 {
			v = v[:254]
		}
		b = append(append(b, byte(sel), byte(len(v))), v...)
	}
	return b
}

// FuzzForeignRecord feeds every foreign format with arbitrary header lists: each either maps
// the record to a failure that the store accepts or names a bad header; it never panics.
func FuzzForeignRecord(f *testing.F) {
	msg := "boom"
	seeds := [][]avro.Header{
		springFailure{topic: "orders", partition: 3, offset: 77, timestamp: 1, group: "g", fqcn: "a.B", message: "m", trace: javaTrace}.headers(),
		connectHeaders("payments", 0, 9, "jdbc-sink", "org.apache.kafka.connect.errors.DataException", &msg, "t"),
		connectHeaders("payments", 0, 9, "jdbc-sink", "org.apache.kafka.connect.errors.DataException", nil, "t"),
		streamsHeaders("clicks", 2, 10, "java.lang.NullPointerException", nil, "t"),
		nil,
	}
	for _, hs := range seeds {
		f.Add(encodeFuzzHeaders(hs), []byte("value"))
	}
	sources := []Source{
		{Format: redrive.SourceSpring, Topic: "s.DLT"},
		{Format: redrive.SourceConnect, Topic: "c.dlq"},
		{Format: redrive.SourceConnect, Topic: "c2.dlq", OriginalTopic: "c2"},
		{Format: redrive.SourceStreams, Topic: "st.dlq"},
		{Format: redrive.SourceRaw, Topic: "r.DLQ", OriginalTopic: "r"},
	}
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, headerBytes, value []byte) {
		hs := fuzzHeaders(headerBytes)
		for _, src := range sources {
			in, err := src.foreignIncoming(&dltRecord{Topic: src.Topic, Partition: 1, Offset: 2, Value: value, Headers: hs}, now)
			if err != nil {
				if !errors.Is(err, ErrBadHeader) {
					t.Fatalf("%s: error %v is not a header error", src.Format, err)
				}
				continue
			}
			if _, err := store.Prepare(in); err != nil {
				t.Fatalf("%s: mapped record refused by the store: %v", src.Format, err)
			}
		}
	})
}

// FuzzStackTraceHash never panics, and a trace hashes like itself with other line numbers.
func FuzzStackTraceHash(f *testing.F) {
	f.Add(javaTrace)
	f.Add("java.lang.Error\n\tat a.B.c(B.java:1)\n... 2 more")
	f.Fuzz(func(t *testing.T, trace string) {
		_ = stackTraceHash(trace)
	})
}

// FuzzParseSource never panics; an entry it accepts prints as an entry that parses to the same
// source.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"spring:orders.DLT", "connect:sink.dlq=payments?temporality=TEMPORARY",
		"raw:x.DLQ=x?publisher=a%26b&code=C", "mpfe:errors", "streams:s?system=shop", "kafka:x", ":", "raw:=?&="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseSource(spec)
		if err != nil {
			if !errors.Is(err, ErrBadSource) {
				t.Fatalf("error %v is not ErrBadSource", err)
			}
			return
		}
		again, err := ParseSource(s.String())
		if err != nil || again != s {
			t.Fatalf("%q parses to %+v, printed %q parses to %+v, %v", spec, s, s.String(), again, err)
		}
	})
}

// FuzzUnwrapDeadLetter never panics on what the own dead-letter topic may hold.
func FuzzUnwrapDeadLetter(f *testing.F) {
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		f.Fatal(err)
	}
	in := &Intake{cfg: Config{Now: time.Now, PublisherSystem: "redrive", PublisherService: "redrive-intake"}}
	topic := "orders.DLT"
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 1, Offset: 9}, Key: []byte("k"),
		Headers: []kafka.Header{{Key: "kafka_dlt-original-topic", Value: []byte("orders")}, {Key: "n", Value: nil}}}
	r := &record{msg: msg, format: redrive.SourceSpring}
	r.reject("bad spring header", &HeaderError{Format: redrive.SourceSpring, Header: springPartition, Reason: "missing"})
	b, err := codec.EncodeEvent("own.DLT", in.wrap(r, keepAll))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, value []byte) {
		m, err := unwrapDeadLetter(codec, "own.DLT", value)
		if err == nil && m.TopicPartition.Topic == nil {
			t.Fatal("unwrapped record without a topic")
		}
	})
}
