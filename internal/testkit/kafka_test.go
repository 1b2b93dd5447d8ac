package testkit_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/redrive/redrive/internal/testkit"
)

// allBytes returns the 256 byte values, starting at start.
func allBytes(start int) []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(start + i)
	}
	return b
}

// record builds the i-th test record. Its "seq" header (first) carries i.
func record(topic string, i int, rng *rand.Rand) *kafka.Message {
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		return b
	}
	var key, value []byte
	switch i % 5 {
	case 0:
		key = nil
	case 1:
		key = []byte{}
	case 2:
		key = allBytes(i)
	case 3:
		key = fmt.Appendf(nil, "key-%d", i)
	case 4:
		key = randBytes(1 + rng.IntN(40))
	}
	switch i % 7 {
	case 0:
		value = []byte{}
	case 1:
		value = nil // tombstone
	case 2:
		value = allBytes(i)
	default:
		value = randBytes(rng.IntN(400))
	}
	headers := []kafka.Header{{Key: "seq", Value: binary.BigEndian.AppendUint32(nil, uint32(i))}}
	switch i % 4 {
	case 0: // duplicate names, order matters
		headers = append(headers,
			kafka.Header{Key: "dup", Value: []byte("first")},
			kafka.Header{Key: "other", Value: []byte("x")},
			kafka.Header{Key: "dup", Value: []byte("second")})
	case 1:
		headers = append(headers, kafka.Header{Key: "null", Value: nil})
	case 2:
		headers = append(headers, kafka.Header{Key: "empty", Value: []byte{}})
	case 3:
		headers = append(headers,
			kafka.Header{Key: "binary", Value: allBytes(i)},
			kafka.Header{Key: "ключ ✓", Value: randBytes(rng.IntN(64))})
	}
	return testkit.Message(topic, key, value, headers...)
}

func seqOf(t *testing.T, headers []kafka.Header) int {
	t.Helper()
	if len(headers) == 0 || headers[0].Key != "seq" || len(headers[0].Value) != 4 {
		t.Fatalf("record without seq header: %v", headers)
	}
	return int(binary.BigEndian.Uint32(headers[0].Value))
}

// wireRecords records what the cluster receives in produce requests, by
// seq header, with the broker's own decoding (nil = length -1 on the wire).
type wireRecords struct {
	mu   sync.Mutex
	recs map[int]kmsg.Record
	err  error
}

func observeProduce(c *testkit.Cluster) *wireRecords {
	w := &wireRecords{recs: make(map[int]kmsg.Record)}
	fake := c.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, topic := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range topic.Partitions {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(p.Records); err != nil {
					w.err = err
					continue
				}
				recs, err := kfake.BatchRecords(batch)
				if err != nil {
					w.err = err
					continue
				}
				for _, r := range recs {
					if len(r.Headers) > 0 && r.Headers[0].Key == "seq" {
						w.recs[int(binary.BigEndian.Uint32(r.Headers[0].Value))] = r
					}
				}
			}
		}
		return nil, nil, false // observe only: the cluster handles the request
	})
	return w
}

// nilness describes nil vs empty for messages.
func nilness(b []byte) string {
	switch {
	case b == nil:
		return "nil"
	case len(b) == 0:
		return "empty"
	default:
		return "bytes"
	}
}

// TestRoundTripExactBytes produces 10,000 records with awkward keys, values
// and headers, reads them back through a consumer group with manual
// commits, and checks every byte, and what confluent-kafka-go does with
// nil and empty slices (documented in doc.go).
func TestRoundTripExactBytes(t *testing.T) {
	t.Parallel()
	const (
		topic      = "roundtrip"
		partitions = 4
		n          = 10_000
		group      = "roundtrip-group"
	)
	c := testkit.Kafka(t)
	c.CreateTopic(t, topic, partitions)
	wire := observeProduce(c)

	rng := rand.New(rand.NewPCG(1, 2))
	sent := make([]*kafka.Message, n)
	for i := range sent {
		sent[i] = record(topic, i, rng)
	}
	start := time.Now()
	delivered := c.Produce(t, sent...)
	t.Logf("produced %d records in %v", n, time.Since(start))
	for i, m := range delivered {
		if seqOf(t, m.Headers) != i {
			t.Fatalf("delivery report %d is for record %d", i, seqOf(t, m.Headers))
		}
	}

	// What the broker received: nil (length -1) and empty (length 0) keys,
	// values and header values are distinct on the wire.
	wire.mu.Lock()
	if wire.err != nil {
		t.Fatalf("decode produce request: %v", wire.err)
	}
	if len(wire.recs) != n {
		t.Fatalf("broker saw %d distinct records, want %d", len(wire.recs), n)
	}
	for i, m := range sent {
		r := wire.recs[i]
		if nilness(r.Key) != nilness(m.Key) || !bytes.Equal(r.Key, m.Key) {
			t.Errorf("record %d: wire key %s %x, sent %s %x", i, nilness(r.Key), r.Key, nilness(m.Key), m.Key)
		}
		if nilness(r.Value) != nilness(m.Value) || !bytes.Equal(r.Value, m.Value) {
			t.Errorf("record %d: wire value %s, sent %s", i, nilness(r.Value), nilness(m.Value))
		}
		if len(r.Headers) != len(m.Headers) {
			t.Fatalf("record %d: wire has %d headers, sent %d", i, len(r.Headers), len(m.Headers))
		}
		for j, h := range m.Headers {
			want := nilness(h.Value)
			if r.Headers[j].Key != h.Key || nilness(r.Headers[j].Value) != want || !bytes.Equal(r.Headers[j].Value, h.Value) {
				t.Errorf("record %d header %d: wire %q=%s %x, sent %q=%s %x", i, j,
					r.Headers[j].Key, nilness(r.Headers[j].Value), r.Headers[j].Value, h.Key, nilness(h.Value), h.Value)
			}
		}
	}
	wire.mu.Unlock()
	if t.Failed() {
		t.FailNow()
	}

	// Read everything back through a group, then commit.
	cons := c.Consumer(t, group, nil)
	if err := cons.Subscribe(topic, nil); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	got := make([]*kafka.Message, n)
	count := 0
	lastOffset := map[int32]kafka.Offset{}
	deadline := time.Now().Add(2 * time.Minute)
	start = time.Now()
	for count < n {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d of %d records", count, n)
		}
		switch ev := cons.Poll(100).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				t.Fatalf("consume: %v", ev.TopicPartition.Error)
			}
			p := ev.TopicPartition.Partition
			if last, ok := lastOffset[p]; ok && ev.TopicPartition.Offset <= last {
				t.Fatalf("partition %d: offset %d after %d", p, ev.TopicPartition.Offset, last)
			}
			lastOffset[p] = ev.TopicPartition.Offset
			i := seqOf(t, ev.Headers)
			if got[i] != nil {
				t.Fatalf("record %d consumed twice", i)
			}
			got[i] = ev
			count++
		case kafka.Error:
			t.Logf("consumer event: %v", ev)
		}
	}
	t.Logf("consumed %d records in %v", n, time.Since(start))
	if _, err := cons.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}

	for i, m := range sent {
		g := got[i]
		if *g.TopicPartition.Topic != topic || g.TopicPartition.Partition != delivered[i].TopicPartition.Partition ||
			g.TopicPartition.Offset != delivered[i].TopicPartition.Offset {
			t.Errorf("record %d: read at %v, delivered at %v", i, g.TopicPartition, delivered[i].TopicPartition)
		}
		// Keys, values and header values keep nil vs empty both ways.
		if nilness(g.Key) != nilness(m.Key) || !bytes.Equal(g.Key, m.Key) {
			t.Errorf("record %d: read key %s %x, sent %s %x", i, nilness(g.Key), g.Key, nilness(m.Key), m.Key)
		}
		if nilness(g.Value) != nilness(m.Value) || !bytes.Equal(g.Value, m.Value) {
			t.Errorf("record %d: read value %s, sent %s", i, nilness(g.Value), nilness(m.Value))
		}
		if len(g.Headers) != len(m.Headers) {
			t.Fatalf("record %d: read %d headers, sent %d: %v", i, len(g.Headers), len(m.Headers), g.Headers)
		}
		for j, h := range m.Headers {
			want := nilness(h.Value)
			if g.Headers[j].Key != h.Key || nilness(g.Headers[j].Value) != want || !bytes.Equal(g.Headers[j].Value, h.Value) {
				t.Errorf("record %d header %d: read %q=%s %x, sent %q=%s %x", i, j,
					g.Headers[j].Key, nilness(g.Headers[j].Value), g.Headers[j].Value, h.Key, nilness(h.Value), h.Value)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	// Committed offsets are the ends of the partitions...
	ends := c.EndOffsets(topic)
	if len(ends) != partitions {
		t.Fatalf("end offsets of %d partitions, want %d", len(ends), partitions)
	}
	var total int64
	for _, end := range ends {
		total += end
	}
	if total != n {
		t.Fatalf("partitions hold %d records, want %d", total, n)
	}
	if committed := c.CommittedOffsets(group, topic); !maps.Equal(committed, ends) {
		t.Fatalf("committed %v, want the ends %v", committed, ends)
	}
	if err := cons.Close(); err != nil {
		t.Fatalf("close consumer: %v", err)
	}

	// ...so a new member of the group gets every partition and nothing to read.
	next := c.Consumer(t, group, nil)
	if err := next.Subscribe(topic, nil); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	deadline = time.Now().Add(30 * time.Second)
	var assigned []kafka.TopicPartition
	for len(assigned) < partitions {
		if time.Now().After(deadline) {
			t.Fatalf("new consumer assigned %v after 30s", assigned)
		}
		if m, ok := next.Poll(100).(*kafka.Message); ok {
			t.Fatalf("new consumer read record at %v", m.TopicPartition)
		}
		var err error
		if assigned, err = next.Assignment(); err != nil {
			t.Fatalf("assignment: %v", err)
		}
	}
	committed, err := next.Committed(assigned, 10_000)
	if err != nil {
		t.Fatalf("committed: %v", err)
	}
	for _, tp := range committed {
		if int64(tp.Offset) != ends[tp.Partition] {
			t.Errorf("partition %d: group offset %v, end %d", tp.Partition, tp.Offset, ends[tp.Partition])
		}
	}
	// Give the new member a moment to fetch from its committed offsets.
	quiet := time.Now().Add(time.Second)
	for time.Now().Before(quiet) {
		if m, ok := next.Poll(100).(*kafka.Message); ok {
			t.Fatalf("new consumer read record at %v", m.TopicPartition)
		}
	}
}

func TestFailProduce(t *testing.T) {
	t.Parallel()
	const topic = "faulty"
	c := testkit.Kafka(t)
	c.CreateTopic(t, topic, 1)

	t.Run("until removed", func(t *testing.T) {
		p := c.ProducerWith(t, kafka.ConfigMap{"message.timeout.ms": 1500})
		fault := c.FailProduce(topic, 0)
		reports := make(chan kafka.Event, 1)
		if err := p.Produce(testkit.Message(topic, []byte("k"), []byte("lost")), reports); err != nil {
			t.Fatal(err)
		}
		m := (<-reports).(*kafka.Message)
		if m.TopicPartition.Error == nil {
			t.Fatalf("delivered at %v while produce fails", m.TopicPartition)
		}
		t.Logf("delivery error while failing: %v (after %d failed requests)", m.TopicPartition.Error, fault.Hits())
		if fault.Hits() == 0 {
			t.Fatal("fault answered no request")
		}
		fault.Remove()

		if err := p.Produce(testkit.Message(topic, []byte("k"), []byte("kept")), reports); err != nil {
			t.Fatal(err)
		}
		if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
			t.Fatalf("produce after Remove: %v", m.TopicPartition.Error)
		}
		got := c.ConsumeN(t, topic, 1, 10*time.Second)
		if string(got[0].Value) != "kept" {
			t.Fatalf("topic holds %q, want only the record produced after Remove", got[0].Value)
		}
	})

	t.Run("n requests", func(t *testing.T) {
		before := c.EndOffsets(topic)[0]
		fault := c.FailProduce(topic, 3)
		start := time.Now()
		out := c.Produce(t, testkit.Message(topic, nil, []byte("retried")))
		t.Logf("delivered after %d failed requests in %v", fault.Hits(), time.Since(start))
		if fault.Hits() != 3 {
			t.Fatalf("fault answered %d requests, want 3", fault.Hits())
		}
		if int64(out[0].TopicPartition.Offset) != before {
			t.Fatalf("delivered at offset %v, want %d (no duplicate)", out[0].TopicPartition.Offset, before)
		}
		if end := c.EndOffsets(topic)[0]; end != before+1 {
			t.Fatalf("end offset %d, want %d", end, before+1)
		}
	})
}

// TestProduceConsumeN checks that ConsumeN reads what Produce wrote, in
// partition order.
func TestProduceConsumeN(t *testing.T) {
	t.Parallel()
	c := testkit.Kafka(t)
	c.CreateTopic(t, "small", 2)
	var msgs []*kafka.Message
	for i := range 20 {
		m := testkit.Message("small", nil, fmt.Appendf(nil, "%d", i))
		m.TopicPartition.Partition = int32(i % 2)
		msgs = append(msgs, m)
	}
	c.Produce(t, msgs...)
	got := c.ConsumeN(t, "small", 20, 10*time.Second)
	next := map[int32]int{0: 0, 1: 1}
	for _, m := range got {
		p := m.TopicPartition.Partition
		if want := fmt.Sprint(next[p]); string(m.Value) != want {
			t.Fatalf("partition %d: read %q, want %q", p, m.Value, want)
		}
		if m.Headers != nil || m.Key != nil {
			t.Fatalf("record without key and headers read back as key %v, headers %v", m.Key, m.Headers)
		}
		next[p] += 2
	}
}

// TestHeaderNameStopsAtNUL pins a confluent-kafka-go limitation: header
// names go through C strings, so a NUL byte ends them.
func TestHeaderNameStopsAtNUL(t *testing.T) {
	t.Parallel()
	c := testkit.Kafka(t)
	c.CreateTopic(t, "nul", 1)
	c.Produce(t, testkit.Message("nul", nil, nil,
		kafka.Header{Key: "a\x00b", Value: []byte("v")},
		kafka.Header{Key: "\xff\xfe", Value: []byte("w")}))
	got := c.ConsumeN(t, "nul", 1, 10*time.Second)[0].Headers
	if len(got) != 2 || got[0].Key != "a" || got[1].Key != "\xff\xfe" {
		t.Fatalf("headers read back as %q; want the first name cut at NUL, the second intact", got)
	}
}
