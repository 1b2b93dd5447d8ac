package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceTimeout bounds how long [Cluster.Produce] waits for delivery
// reports.
const ProduceTimeout = time.Minute

// Cluster is an in-process Kafka cluster (kfake) that lives for one test,
// with helpers that use confluent-kafka-go against it.
type Cluster struct {
	t         testing.TB
	fake      *kfake.Cluster
	bootstrap string
	logger    *testLogger

	mu       sync.Mutex
	producer *kafka.Producer // shared by Produce, created on first use
	stopLogs func()          // stops the shared producer's log forwarding
}

// Kafka starts an in-process Kafka cluster, closed when the test ends.
// The cluster has one broker, lets groups use session timeouts down to
// 100ms and does not create topics on demand; opts are applied after these
// defaults (for example kfake.NumBrokers(3) or kfake.SeedTopics).
func Kafka(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	logger := &testLogger{t: t}
	all := append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.WithLogger(logger),
	}, opts...)
	fake, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("testkit: start kfake cluster: %v", err)
	}
	c := &Cluster{
		t:         t,
		fake:      fake,
		bootstrap: strings.Join(fake.ListenAddrs(), ","),
		logger:    logger,
	}
	t.Cleanup(func() {
		c.mu.Lock()
		if c.producer != nil {
			c.producer.Close()
			c.stopLogs()
			c.producer = nil
		}
		c.mu.Unlock()
		fake.Close()
		logger.stop()
	})
	return c
}

// Bootstrap returns the comma-separated broker addresses, for
// bootstrap.servers.
func (c *Cluster) Bootstrap() string { return c.bootstrap }

// Fake returns the kfake cluster, for fault injection (Fault, ControlKey)
// and inspection (PartitionInfo, GroupInfo).
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// CreateTopic creates a topic with the given number of partitions, failing
// the test on error.
func (c *Cluster) CreateTopic(t testing.TB, name string, partitions int) {
	t.Helper()
	if err := c.fake.CreateTopic(name, int32(partitions), nil); err != nil {
		t.Fatalf("testkit: create topic %q: %v", name, err)
	}
}

// ProducerConfig returns the settings [Cluster.Producer] uses: acks=all,
// idempotence, linger.ms=5, message.timeout.ms=30000, and logs forwarded
// to the test log. Entries of extra override them.
func (c *Cluster) ProducerConfig(extra kafka.ConfigMap) kafka.ConfigMap {
	cfg := kafka.ConfigMap{
		"bootstrap.servers":      c.bootstrap,
		"client.id":              "redrive-test-producer",
		"acks":                   "all",
		"enable.idempotence":     true,
		"linger.ms":              5,
		"message.timeout.ms":     30000,
		"log_level":              4, // warning
		"go.logs.channel.enable": true,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

// Producer returns a producer for the cluster, closed when the test ends.
// Delivery reports go to the channel passed to Produce or, when it is nil,
// to Events(), which the caller must then drain (Flush counts undrained
// events as outstanding).
func (c *Cluster) Producer(t testing.TB) *kafka.Producer {
	t.Helper()
	return c.ProducerWith(t, nil)
}

// ProducerWith is [Cluster.Producer] with extra settings overriding the
// defaults of [Cluster.ProducerConfig].
func (c *Cluster) ProducerWith(t testing.TB, extra kafka.ConfigMap) *kafka.Producer {
	t.Helper()
	p, stop := c.newProducer(t, t, extra)
	t.Cleanup(func() {
		p.Close()
		stop()
	})
	return p
}

func (c *Cluster) newProducer(t, logT testing.TB, extra kafka.ConfigMap) (*kafka.Producer, func()) {
	t.Helper()
	cfg := c.ProducerConfig(extra)
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		t.Fatalf("testkit: new producer: %v", err)
	}
	return p, forwardLogs(logT, "producer", p.Logs())
}

// Message returns a record for topic with the partition left to the
// partitioner, for [Cluster.Produce] or kafka.Producer.Produce.
func Message(topic string, key, value []byte, headers ...kafka.Header) *kafka.Message {
	return &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key:            key,
		Value:          value,
		Headers:        headers,
	}
}

// produceOpaque tags a message with its index; the caller's Opaque is kept.
type produceOpaque struct {
	index  int
	opaque any
}

// Produce produces msgs with a producer shared by the cluster, waits for
// every delivery report, and fails the test if any delivery fails or
// [ProduceTimeout] passes. It returns the delivery reports (the messages
// with their partitions and offsets, headers included) in the order of
// msgs. A message whose
// TopicPartition.Partition is 0 goes to partition 0: use [Message] or
// kafka.PartitionAny to let the partitioner choose. Call it from the test
// goroutine.
func (c *Cluster) Produce(t testing.TB, msgs ...*kafka.Message) []*kafka.Message {
	t.Helper()
	p := c.sharedProducer(t)
	reports := make(chan kafka.Event, len(msgs))
	for i, m := range msgs {
		orig := m.Opaque
		m.Opaque = produceOpaque{index: i, opaque: orig}
		err := p.Produce(m, reports)
		m.Opaque = orig
		for err != nil && isQueueFull(err) {
			p.Flush(100) // returns once the local queue drains, or after 100ms
			m.Opaque = produceOpaque{index: i, opaque: orig}
			err = p.Produce(m, reports)
			m.Opaque = orig
		}
		if err != nil {
			t.Fatalf("testkit: produce message %d: %v", i, err)
		}
	}
	out := make([]*kafka.Message, len(msgs))
	var errs []error
	deadline := time.NewTimer(ProduceTimeout)
	defer deadline.Stop()
	for range msgs {
		select {
		case ev := <-reports:
			m, ok := ev.(*kafka.Message)
			if !ok {
				t.Fatalf("testkit: unexpected delivery event %T: %v", ev, ev)
			}
			po := m.Opaque.(produceOpaque)
			m.Opaque = po.opaque
			out[po.index] = m
			if m.TopicPartition.Error != nil && len(errs) < 10 {
				errs = append(errs, fmt.Errorf("message %d: %w", po.index, m.TopicPartition.Error))
			}
		case <-deadline.C:
			t.Fatalf("testkit: no delivery report for some of %d messages after %v", len(msgs), ProduceTimeout)
		}
	}
	if len(errs) > 0 {
		t.Fatalf("testkit: delivery failed: %v", errors.Join(errs...))
	}
	return out
}

func isQueueFull(err error) bool {
	var kafkaErr kafka.Error
	return errors.As(err, &kafkaErr) && kafkaErr.Code() == kafka.ErrQueueFull
}

// sharedProducer returns the producer used by Produce, creating it on first
// use. It lives until the cluster closes, whatever test first asked for it.
func (c *Cluster) sharedProducer(t testing.TB) *kafka.Producer {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.producer == nil {
		c.producer, c.stopLogs = c.newProducer(t, c.t, kafka.ConfigMap{"go.delivery.report.fields": "all"})
	}
	return c.producer
}

// ConsumerConfig returns the settings [Cluster.Consumer] uses: group,
// auto.offset.reset=earliest, enable.auto.commit=false (commit with
// Commit, CommitMessage or CommitOffsets; offsets of delivered messages
// are stored automatically), a 3s session timeout, fetch.wait.max.ms=100,
// and logs forwarded to the test log. Entries of extra override them.
func (c *Cluster) ConsumerConfig(group string, extra kafka.ConfigMap) kafka.ConfigMap {
	cfg := kafka.ConfigMap{
		"bootstrap.servers":      c.bootstrap,
		"client.id":              "redrive-test-consumer",
		"group.id":               group,
		"auto.offset.reset":      "earliest",
		"enable.auto.commit":     false,
		"session.timeout.ms":     3000,
		"heartbeat.interval.ms":  300,
		"fetch.wait.max.ms":      100,
		"log_level":              4, // warning
		"go.logs.channel.enable": true,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

// Consumer returns a consumer in group for the cluster, not yet
// subscribed, closed when the test ends. extra overrides the defaults of
// [Cluster.ConsumerConfig]; it may be nil.
func (c *Cluster) Consumer(t testing.TB, group string, extra kafka.ConfigMap) *kafka.Consumer {
	t.Helper()
	cfg := c.ConsumerConfig(group, extra)
	cons, err := kafka.NewConsumer(&cfg)
	if err != nil {
		t.Fatalf("testkit: new consumer: %v", err)
	}
	stop := forwardLogs(t, "consumer", cons.Logs())
	t.Cleanup(func() {
		_ = cons.Close()
		stop()
	})
	return cons
}

// ConsumeN reads the first n records of topic, from every partition, and
// fails the test if fewer arrive within timeout. It assigns the partitions
// directly, so it joins no group and commits nothing. Records of one
// partition keep their order; partitions interleave.
func (c *Cluster) ConsumeN(t testing.TB, topic string, n int, timeout time.Duration) []*kafka.Message {
	t.Helper()
	infos := c.fake.PartitionInfos(topic)
	if len(infos) == 0 {
		t.Fatalf("testkit: ConsumeN: topic %q does not exist", topic)
	}
	cons := c.Consumer(t, "testkit-consumen-"+randomHex(4), nil)
	// Knowing the leaders before Assign saves librdkafka's 500ms retry of
	// an offset query sent before metadata arrived.
	if _, err := cons.GetMetadata(&topic, false, 10_000); err != nil {
		t.Fatalf("testkit: ConsumeN: metadata of %q: %v", topic, err)
	}
	tps := make([]kafka.TopicPartition, len(infos))
	for i, info := range infos {
		tps[i] = kafka.TopicPartition{Topic: &topic, Partition: info.Partition, Offset: kafka.OffsetBeginning}
	}
	if err := cons.Assign(tps); err != nil {
		t.Fatalf("testkit: ConsumeN: assign %q: %v", topic, err)
	}
	out := make([]*kafka.Message, 0, n)
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("testkit: ConsumeN: read %d of %d records from %q in %v", len(out), n, topic, timeout)
		}
		switch ev := cons.Poll(int(min(left, 100*time.Millisecond).Milliseconds()) + 1).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				t.Fatalf("testkit: ConsumeN: %v", ev.TopicPartition.Error)
			}
			out = append(out, ev)
		case kafka.Error:
			if ev.IsFatal() {
				t.Fatalf("testkit: ConsumeN: %v", ev)
			}
			t.Logf("testkit: ConsumeN: %v", ev)
		}
	}
	return out
}

// EndOffsets returns the high watermark of every partition of topic: the
// offset the next record will get.
func (c *Cluster) EndOffsets(topic string) map[int32]int64 {
	out := make(map[int32]int64)
	for _, info := range c.fake.PartitionInfos(topic) {
		out[info.Partition] = info.HighWatermark
	}
	return out
}

// CommittedOffsets returns the offsets group has committed for topic, by
// partition; partitions without a commit are absent.
func (c *Cluster) CommittedOffsets(group, topic string) map[int32]int64 {
	out := make(map[int32]int64)
	info := c.fake.GroupInfo(group)
	if info == nil {
		return out
	}
	for p, commit := range info.Commits[topic] {
		out[p] = commit.Offset
	}
	return out
}

// FailProduce makes produce requests to topic fail with the retriable
// NOT_ENOUGH_REPLICAS error, as a broker that lost its replicas does:
// the next n requests when n > 0, every request until the handle's Remove
// when n <= 0. The records of a failed request are not written; a
// confluent-kafka-go producer retries them until its message.timeout.ms,
// then reports "Local: Message timed out". The handle's Hits and Wait tell
// how many requests have failed; Remove ends the fault early.
func (c *Cluster) FailProduce(topic string, n int) *kfake.FaultHandle {
	if n <= 0 {
		n = -1
	}
	return c.fake.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: topic,
		Err:   kerr.NotEnoughReplicas,
		Count: n,
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// forwardLogs copies librdkafka log events to t.Log until logs is closed
// (by the client's Close); the returned func waits for that.
func forwardLogs(t testing.TB, who string, logs chan kafka.LogEvent) func() {
	if logs == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range logs {
			t.Logf("librdkafka %s %s: level %d %s: %s", who, ev.Name, ev.Level, ev.Tag, ev.Message)
		}
	}()
	return func() { <-done }
}

// testLogger sends kfake's warnings and errors to the test log until the
// cluster is closed.
type testLogger struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

// Logf implements kfake.Logger.
func (l *testLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	if level > kfake.LogLevelWarn {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("kfake %s: "+format, append([]any{level}, args...)...)
	}
}

func (l *testLogger) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}
