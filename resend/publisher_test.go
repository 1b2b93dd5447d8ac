package resend

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
)

func hdr(name string, value []byte) avro.Header { return avro.Header{Name: name, Value: value} }

func TestResendHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stored []avro.Header
		want   string
	}{
		{"none", nil,
			`jeap_eh_target_service="svc" jeap_eh_error_handling_service="redrive" redrive-origin="origin"`},
		{"order, duplicates and nulls kept",
			[]avro.Header{hdr("b", []byte("1")), hdr("a", nil), hdr("b", []byte("2"))},
			`b="1" a=<nil> b="2" jeap_eh_target_service="svc" jeap_eh_error_handling_service="redrive" redrive-origin="origin"`},
		{"earlier resend headers replaced, once each",
			[]avro.Header{
				hdr(avro.HeaderTargetService, []byte("old")), hdr("x", []byte("1")),
				hdr(avro.HeaderErrorHandlingService, []byte("old-ehs")), hdr(avro.HeaderOrigin, []byte("old-origin")),
				hdr(avro.HeaderTargetService, []byte("older")), hdr("y", nil),
			},
			`x="1" y=<nil> jeap_eh_target_service="svc" jeap_eh_error_handling_service="redrive" redrive-origin="origin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := headerList(ResendHeaders(tt.stored, "svc", "redrive", "origin"))
			if got != tt.want {
				t.Fatalf("headers\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// A resent record carries the stored key, value and headers byte for byte, plus the three
// resend headers exactly once, however often the message was resent before. The chain is the
// real one: each record read back becomes the stored original of the next failure.
func TestResendByteExactThroughThreeResends(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 3})
	s := e.scheduler(t, nil)
	ctx := context.Background()

	key := []byte{0x00, 'k', 0xff, 0x10, 0x00}
	value := make([]byte, 512)
	for i := range value {
		value[i] = byte(i * 7)
	}
	original := []avro.Header{
		hdr("trace-id", []byte("t-1")),
		hdr("null-header", nil),
		hdr("binary", []byte{0x00, 0x01, 0xfe, 0xff}),
		hdr("trace-id", []byte("t-2")),
		hdr("ключ ✓", []byte("ünïcode")),
		hdr("empty", []byte{}),
	}
	wantHeaders := headerList(ResendHeaders(original, "order-service", "redrive-test", "msg-1"))

	// What a Java (murmur2) producer chooses for this key, to compare with PartitionByKey.
	javaLike := e.cluster.ProducerWith(t, kafka.ConfigMap{"partitioner": "murmur2_random"})
	probe := testkit.Message("probe", key, []byte("x"))
	e.cluster.CreateTopic(t, "probe", 3)
	reports := make(chan kafka.Event, 1)
	if err := javaLike.Produce(probe, reports); err != nil {
		t.Fatal(err)
	}
	wantPartition := (<-reports).(*kafka.Message).TopicPartition.Partition

	stored := original
	var got []*kafka.Message
	for attempt := 1; attempt <= 3; attempt++ {
		id := e.insertFailure(t, row{
			Topic: topic, Partition: 1, Offset: int64(100 + attempt), Key: key, Value: value,
			Headers: stored, Causing: "msg-1", Attempt: attempt,
		})
		st, err := s.round(ctx)
		if err != nil || st.resent != 1 {
			t.Fatalf("round %d: %+v, %v", attempt, st, err)
		}
		if f := e.failure(t, id); f.State != redrive.StateResent || f.ResentAt == nil || f.LeaseOwner != nil {
			t.Fatalf("round %d: failure after resend: %+v", attempt, f)
		}
		got = e.cluster.ConsumeN(t, topic, attempt, 30*time.Second)
		rec := got[attempt-1]
		for _, m := range got { // ConsumeN interleaves partitions: find the newest
			if m.TopicPartition.Offset > rec.TopicPartition.Offset {
				rec = m
			}
		}
		if !bytes.Equal(rec.Key, key) {
			t.Fatalf("round %d: key %x, want %x", attempt, rec.Key, key)
		}
		if !bytes.Equal(rec.Value, value) {
			t.Fatalf("round %d: value differs", attempt)
		}
		if h := headerList(rec.Headers); h != wantHeaders {
			t.Fatalf("round %d: headers\n got %s\nwant %s", attempt, h, wantHeaders)
		}
		if rec.TopicPartition.Partition != wantPartition {
			t.Fatalf("round %d: partition %d, want %d (murmur2 of the key)", attempt, rec.TopicPartition.Partition, wantPartition)
		}
		// The next failure of the message stores what the consumer read.
		stored = make([]avro.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			stored[i] = avro.Header{Name: h.Key, Value: h.Value}
		}
	}
	for _, name := range []string{avro.HeaderTargetService, avro.HeaderErrorHandlingService, avro.HeaderOrigin} {
		n := 0
		for _, h := range stored {
			if h.Name == name {
				n++
			}
		}
		if n != 1 {
			t.Errorf("after three resends %s appears %d times, want once", name, n)
		}
	}
}

func TestResendToOriginalPartition(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	e := newEnv(t, map[string]int{topic: 4})
	s := e.scheduler(t, func(c *Config) { c.Partitioning = PartitionOriginal })
	for _, p := range []int32{3, 0, 2} {
		e.insertFailure(t, row{Topic: topic, Partition: p, Key: []byte("same-key")})
	}
	if st, err := s.round(context.Background()); err != nil || st.resent != 3 {
		t.Fatalf("round: %+v, %v", st, err)
	}
	ends := e.cluster.EndOffsets(topic)
	for p, want := range map[int32]int64{0: 1, 1: 0, 2: 1, 3: 1} {
		if ends[p] != want {
			t.Errorf("partition %d holds %d records, want %d", p, ends[p], want)
		}
	}
}
