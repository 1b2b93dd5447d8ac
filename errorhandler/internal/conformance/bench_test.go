package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
	"github.com/redrive/redrive/errorhandler/franz"
	"github.com/redrive/redrive/internal/testkit"
)

// BenchmarkDeadLetterVariants compares, on one in-process broker (kfake) and over the same
// records, for each client (franz-go and confluent-kafka-go):
//
//	plain   a plain poll loop of the client (decode + handler inline, autocommit)
//	runner  the adapter's Runner on the happy path
//	dl      the Runner dead-lettering every record (pipelined, acks=all, idempotent)
//	sync    a poll loop that publishes each failure with the adapter's DeadLetterer and waits
//	        for its acknowledgement before the next record (the jEAP pattern)
//	ceiling the plain poll loop producing a ready-made MPFE per record with the MPFE
//	        producer's settings of the client: the Kafka work of dead-lettering without the
//	        middleware, so the most any dead-letter path can reach on this client and broker
//
// Each variant is timed from the creation of its client until every record's outcome is
// final; plain, runner, dl and ceiling run interleaved, EH_BENCH_REPS times each (default 3),
// and each ratio is taken within a repetition. It prints the median records/s and process CPU
// time of each variant, and the median and the values of each ratio per client: dl/ceiling
// (throughput, and by CPU: the ceiling's process CPU over dl's), ceiling/runner, runner/plain (time, also from the first
// record and by CPU), dl/runner and dl/sync.
// Run it with:
//
//	go test -run '^$' -bench DeadLetterVariants -benchtime 1x ./errorhandler/internal/conformance/
//
// EH_BENCH_RECORDS overrides the number of records (default 200000), EH_BENCH_SYNC_RECORDS
// the number the slow sync variants handle (default 20000; their rate is what counts);
// EH_BENCH_ONLY=<client>-<variant> (e.g. franz-runner) runs one variant, e.g. under a profiler;
// EH_BENCH_MAX_BUFFERED sets the Runner's MaxBuffered.
func BenchmarkDeadLetterVariants(b *testing.B) {
	n := envInt(b, "EH_BENCH_RECORDS", 200_000)
	nSync := min(n, envInt(b, "EH_BENCH_SYNC_RECORDS", 20_000))
	k := testkit.Kafka(b)
	const in = "bench-in"
	k.CreateTopic(b, in, 4)
	k.CreateTopic(b, "bench-err", 4)
	startProduce := time.Now()
	produceBench(b, k, in, n)
	fmt.Printf("setup: produced %d records in %v\n", n, time.Since(startProduce).Round(time.Millisecond))
	b.ResetTimer()

	group := 0
	run := func(client, variant string, records int) (time.Duration, time.Duration) {
		group++
		g := fmt.Sprintf("%s-%s-%d", client, variant, group)
		c := cpuTime()
		var d time.Duration
		switch client + "-" + variant {
		case "franz-plain":
			d = benchFranzPlain(b, k, in, n, g)
		case "confluent-plain":
			d = benchConfluentPlain(b, k, in, n, g)
		case "franz-runner", "confluent-runner":
			d = benchRunner(b, k, client, in, n, g, false)
		case "franz-dl", "confluent-dl":
			d = benchRunner(b, k, client, in, n, g, true)
		case "franz-sync", "confluent-sync":
			d = benchSync(b, k, client, in, records, g)
		case "franz-ceiling":
			d = benchFranzCeiling(b, k, in, n, g)
		case "confluent-ceiling":
			d = benchConfluentCeiling(b, k, in, n, g)
		default:
			b.Fatalf("unknown variant %s-%s", client, variant)
		}
		return d, cpuTime() - c
	}
	if only := os.Getenv("EH_BENCH_ONLY"); only != "" {
		client, variant, _ := strings.Cut(only, "-")
		records := n
		if variant == "sync" {
			records = nSync
		}
		d, c := run(client, variant, records)
		fmt.Printf("%s: %9.0f records/s (%v, cpu %v)\n", only, float64(records)/d.Seconds(), d.Round(time.Millisecond), c.Round(time.Millisecond))
		return
	}
	reps := envInt(b, "EH_BENCH_REPS", 3)
	for range b.N {
		fmt.Printf("records: %d (sync variants: %d), %d repetitions\n", n, nSync, reps)
		rate := func(records int, d time.Duration) float64 { return float64(records) / d.Seconds() }
		for _, client := range []string{"franz", "confluent"} {
			// The variants run interleaved, reps times each, so that a change of the machine's
			// load meets all of them; each ratio is taken within a repetition and its median
			// and range printed.
			variants := []string{"plain", "runner", "dl", "ceiling"}
			t := make([][]time.Duration, len(variants))
			c := make([][]time.Duration, len(variants))
			var firsts [2][]time.Duration
			for range reps {
				for i, v := range variants {
					d, cpu := run(client, v, n)
					t[i], c[i] = append(t[i], d), append(c[i], cpu)
					if i < 2 {
						firsts[i] = append(firsts[i], firstRecord)
					}
				}
			}
			tSync, cSync := run(client, "sync", nSync)
			for i, v := range variants {
				rates := make([]float64, reps)
				for r := range reps {
					rates[r] = rate(n, t[i][r])
				}
				fmt.Printf("%-10s %-7s %9.0f records/s median [%s] (process cpu median %v)\n", client, v, median(rates), spread(rates, "%.0f"),
					medianDuration(c[i]).Round(time.Millisecond))
				b.ReportMetric(median(rates), client+"-"+v+"-rec/s")
			}
			fmt.Printf("%-10s %-7s %9.0f records/s (%v, process cpu %v)\n", client, "sync", rate(nSync, tSync), tSync.Round(time.Millisecond), cSync.Round(time.Millisecond))
			b.ReportMetric(rate(nSync, tSync), client+"-sync-rec/s")
			ratio := func(f func(r int) float64) []float64 {
				out := make([]float64, reps)
				for r := range reps {
					out[r] = f(r)
				}
				return out
			}
			thr := func(i, j int) []float64 {
				return ratio(func(r int) float64 { return t[j][r].Seconds() / t[i][r].Seconds() })
			}
			cpuRatio := func(i, j int) []float64 {
				return ratio(func(r int) float64 { return c[j][r].Seconds() / c[i][r].Seconds() })
			}
			line := func(name string, v []float64, note string) {
				fmt.Printf("%-10s %-34s %.3f [%s] %s\n", client, name, median(v), spread(v, "%.3f"), note)
			}
			line("dl/ceiling throughput:", thr(2, 3), "(target >= 0.8)")
			line("  by process cpu (ceiling/dl):", cpuRatio(2, 3), "")
			line("ceiling/runner throughput:", thr(3, 1), "(the most any dead-letter path can reach here)")
			line("runner/plain time:", ratio(func(r int) float64 { return t[1][r].Seconds() / t[0][r].Seconds() }), "(target <= 1.05)")
			line("  after the first record:", ratio(func(r int) float64 {
				return (t[1][r] - firsts[1][r]).Seconds() / (t[0][r] - firsts[0][r]).Seconds()
			}), "")
			line("  runner/plain process cpu:", ratio(func(r int) float64 { return c[1][r].Seconds() / c[0][r].Seconds() }), "")
			line("dl/runner throughput:", thr(2, 1), "(target >= 0.5)")
			fmt.Printf("%-10s %-34s %.1f\n", client, "dl/sync throughput (median dl):", median(ratio(func(r int) float64 { return rate(n, t[2][r]) }))/rate(nSync, tSync))
		}
	}
}

// median returns the median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianDuration(v []time.Duration) time.Duration {
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	return time.Duration(median(f))
}

// spread formats the values of v, lowest to highest.
func spread(v []float64, format string) string {
	s := slices.Clone(v)
	slices.Sort(s)
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, " ")
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}

// produceBench writes n records to topic with keys order-<i>, each with a type header.
func produceBench(b *testing.B, k *testkit.Cluster, topic string, n int) {
	produceRecords(b, k, n, func(i int, value []byte) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("order-" + strconv.Itoa(i)), Value: value,
			Headers: []kgo.RecordHeader{{Key: "type", Value: []byte("OrderPlaced")}}}
	})
}

// produceRecords writes record(i, value) for each i below n, where value is the benchmarks'
// order, and waits until all are acknowledged.
func produceRecords(b *testing.B, k *testkit.Cluster, n int, record func(i int, value []byte) *kgo.Record) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.Bootstrap(), ",")...), kgo.ProducerLinger(20*time.Millisecond),
		kgo.MaxBufferedRecords(50_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := []byte(`{"id":"order-000000","amount":1250,"currency":"CHF","items":3}`)
	var failed atomic.Pointer[error]
	for i := range n {
		cl.Produce(context.Background(), record(i, value), func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// firstRecord is the time the last plain or runner variant took from its start to its first
// record: mostly the consumer group's join, which varies between runs whatever the consumer.
var firstRecord time.Duration

// benchFranzConsumer returns a kgo consumer of topic in group, from the start, with opts.
func benchFranzConsumer(b *testing.B, k *testkit.Cluster, topic, group string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(k.Bootstrap(), ",")...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// benchConfluentConsumer returns a confluent-kafka-go consumer subscribed to topic in group,
// from the start, with the extra settings.
func benchConfluentConsumer(b *testing.B, k *testkit.Cluster, topic, group string, extra kafka.ConfigMap) *kafka.Consumer {
	cfg := kafka.ConfigMap{"bootstrap.servers": k.Bootstrap(), "group.id": group, "auto.offset.reset": "earliest", "log_level": 3}
	for key, v := range extra {
		cfg[key] = v
	}
	c, err := kafka.NewConsumer(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Subscribe(topic, nil); err != nil {
		_ = c.Close()
		b.Fatal(err)
	}
	return c
}

// benchDecoder and benchHandle are the work every variant does per record.
var benchDecoder = eh.Bytes()

func benchHandle(_ context.Context, rec eh.Record[[]byte, []byte]) error {
	if len(rec.Value) == 0 {
		return errors.New("empty order")
	}
	return nil
}

var errBench = errors.New("order rejected")

func benchFranzPlain(b *testing.B, k *testkit.Cluster, topic string, n int, group string) time.Duration {
	start := time.Now()
	franzPlainLoop(b, k, topic, n, group, start, nil)
	return time.Since(start)
}

// franzPlainLoop consumes n records of topic in a plain kgo poll loop, decoding and handling
// each inline, then calling then (when not nil) with it.
func franzPlainLoop(b *testing.B, k *testkit.Cluster, topic string, n int, group string, start time.Time, then func(*kgo.Record)) {
	cl := benchFranzConsumer(b, k, topic, group)
	defer cl.Close()
	ctx := context.Background()
	for got := 0; got < n; {
		fetches := cl.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			v, err := benchDecoder.Decode(topic, r.Value)
			if err != nil {
				b.Fatal(err)
			}
			if err := benchHandle(ctx, eh.Record[[]byte, []byte]{Value: v, Message: franz.Message(r)}); err != nil {
				b.Fatal(err)
			}
			if then != nil {
				then(r)
			}
			if got == 0 {
				firstRecord = time.Since(start)
			}
			got++
		})
	}
}

func benchConfluentPlain(b *testing.B, k *testkit.Cluster, topic string, n int, group string) time.Duration {
	start := time.Now()
	c := benchConfluentConsumer(b, k, topic, group, nil)
	defer c.Close()
	confluentPlainLoop(b, c, topic, n, start, nil)
	return time.Since(start)
}

// confluentPlainLoop is franzPlainLoop on confluent-kafka-go: it consumes n records of topic
// with c in a plain poll loop, decoding and handling each inline, then calling then (when not
// nil) with it. The caller closes c, outside the measured time (closing leaves the group).
func confluentPlainLoop(b *testing.B, c *kafka.Consumer, topic string, n int, start time.Time, then func(*kafka.Message)) {
	for got := 0; got < n; {
		if m, ok := c.Poll(100).(*kafka.Message); ok {
			v, err := benchDecoder.Decode(topic, m.Value)
			if err != nil {
				b.Fatal(err)
			}
			if err := benchHandle(context.Background(), eh.Record[[]byte, []byte]{Value: v, Message: confluent.Message(m)}); err != nil {
				b.Fatal(err)
			}
			if then != nil {
				then(m)
			}
			if got == 0 {
				firstRecord = time.Since(start)
			}
			got++
		}
	}
}

func benchRunner(b *testing.B, k *testkit.Cluster, client, topic string, n int, group string, fail bool) time.Duration {
	reg := prometheus.NewRegistry()
	var handled atomic.Int64
	start := time.Now()
	cfg := eh.Config[[]byte, []byte]{
		GroupID: group, Topics: []string{topic}, System: "bench", Service: "bench",
		ValueDecoder: benchDecoder,
		Handler: eh.HandlerFunc[[]byte, []byte](func(ctx context.Context, rec eh.Record[[]byte, []byte]) error {
			if err := benchHandle(ctx, rec); err != nil {
				return err
			}
			if fail {
				return errBench
			}
			handled.Add(1)
			return nil
		}),
		ProcessPolicy:  eh.DeadLetter,
		FloodThreshold: -1,
		DeadLetter:     eh.DeadLetterConfig{ErrorTopic: "bench-err"},
		Metrics:        reg,
	}
	if os.Getenv("EH_BENCH_MAX_BUFFERED") != "" {
		cfg.MaxBuffered = envInt(b, "EH_BENCH_MAX_BUFFERED", 0)
	}
	r := newBenchRunner(b, k, client, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	labels := map[string]string{"phase": string(eh.PhaseProcess), "outcome": string(eh.OutcomeDeadLettered), "topic": topic}
	firstRecord = 0
	for {
		if firstRecord == 0 && handled.Load() > 0 {
			firstRecord = time.Since(start)
		}
		var final int64
		if fail {
			final = int64(metricValue(reg, "redrive_errorhandler_failures_total", labels))
		} else {
			final = handled.Load()
		}
		if final >= int64(n) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	d := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if f := metricValue(reg, "redrive_errorhandler_dead_letter_produce_failures_total", map[string]string{"error_topic": "bench-err"}); f > 0 {
		fmt.Printf("%s: %v failed MPFE produce attempts (retried)\n", group, f)
	}
	return d
}

// benchSettings returns the settings of both adapters on k, for the benchmarks' runners.
func benchSettings(k *testkit.Cluster) (franz.Settings, confluent.Settings) {
	return franz.Settings{Brokers: strings.Split(k.Bootstrap(), ",")},
		confluent.Settings{Brokers: k.Bootstrap(), ConsumerConfig: kafka.ConfigMap{"log_level": 3}, ProducerConfig: kafka.ConfigMap{"log_level": 3}}
}

// newBenchRunner returns a Runner of client ("franz" or "confluent") with cfg and the
// benchSettings of k.
func newBenchRunner(b *testing.B, k *testkit.Cluster, client string, cfg eh.Config[[]byte, []byte]) runner {
	fs, cs := benchSettings(k)
	var r runner
	var err error
	if client == "franz" {
		r, err = franz.New(cfg, fs)
	} else {
		r, err = confluent.New(cfg, cs)
	}
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// benchFranzCeiling is the Kafka work of the dead-letter path without the middleware: the
// plain poll loop, producing for each record a ready-made MPFE of the size the middleware
// writes (its event id changed per record) with the MPFE producer's settings (acks=all,
// idempotence, snappy, linger 20ms), until every record is acknowledged. No dead-letter path
// on this client and broker can be faster.
func benchFranzCeiling(b *testing.B, k *testkit.Cluster, topic string, n int, group string) time.Duration {
	template, key := ceilingEvent(b, topic)
	eventAt := bytes.Index(template, []byte(ceilingEventID))
	idemAt := bytes.Index(template, []byte(ceilingIdempotenceID))
	keyIdemAt := bytes.Index(key, []byte(ceilingIdempotenceID))
	rnd := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	prod, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.Bootstrap(), ",")...),
		kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	ctx := context.Background()
	var failed atomic.Pointer[error]
	franzPlainLoop(b, k, topic, n, group, start, func(*kgo.Record) {
		// Each MPFE has its own event id and idempotence id (random and hash-like bytes
		// compress as badly as in real events).
		buf := make([]byte, len(key)+len(template))
		copy(buf, key)
		copy(buf[len(key):], template)
		randomHex(rnd, buf[len(key)+eventAt:][:36])
		randomHex(rnd, buf[len(key)+idemAt:][:36])
		copy(buf[keyIdemAt:][:36], buf[len(key)+idemAt:][:36])
		prod.Produce(ctx, &kgo.Record{Topic: "bench-err", Key: buf[:len(key):len(key)], Value: buf[len(key):]},
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			})
	})
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return time.Since(start)
}

// benchConfluentCeiling is benchFranzCeiling on confluent-kafka-go: the plain poll loop and a
// producer with the adapter's MPFE producer settings (acks=all, idempotence, lz4, linger 20ms,
// no delivery report fields), until every MPFE is acknowledged.
func benchConfluentCeiling(b *testing.B, k *testkit.Cluster, topic string, n int, group string) time.Duration {
	template, key := ceilingEvent(b, topic)
	eventAt := bytes.Index(template, []byte(ceilingEventID))
	idemAt := bytes.Index(template, []byte(ceilingIdempotenceID))
	keyIdemAt := bytes.Index(key, []byte(ceilingIdempotenceID))
	rnd := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	prod, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": k.Bootstrap(), "acks": "all", "enable.idempotence": true, "linger.ms": 20,
		"compression.type": "lz4", "message.timeout.ms": 30000, "go.delivery.report.fields": "none", "log_level": 3,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	var acked atomic.Int64
	var failed atomic.Pointer[error]
	delivered := make(chan struct{}, 1)
	reports := make(chan struct{})
	go func() {
		defer close(reports)
		for ev := range prod.Events() {
			if m, ok := ev.(*kafka.Message); ok {
				if err := m.TopicPartition.Error; err != nil {
					failed.CompareAndSwap(nil, &err)
				}
				acked.Add(1)
				select {
				case delivered <- struct{}{}:
				default:
				}
			}
		}
	}()
	errTopic := "bench-err"
	c := benchConfluentConsumer(b, k, topic, group, nil)
	defer c.Close()
	confluentPlainLoop(b, c, topic, n, start, func(*kafka.Message) {
		buf := make([]byte, len(key)+len(template))
		copy(buf, key)
		copy(buf[len(key):], template)
		randomHex(rnd, buf[len(key)+eventAt:][:36])
		randomHex(rnd, buf[len(key)+idemAt:][:36])
		copy(buf[keyIdemAt:][:36], buf[len(key)+idemAt:][:36])
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &errTopic, Partition: kafka.PartitionAny},
			Key: buf[:len(key):len(key)], Value: buf[len(key):]}
		for {
			err := prod.Produce(msg, nil)
			var kerr kafka.Error
			if errors.As(err, &kerr) && kerr.Code() == kafka.ErrQueueFull {
				<-delivered
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			break
		}
	})
	for acked.Load() < int64(n) {
		select {
		case <-delivered:
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return time.Since(start)
}

const (
	ceilingEventID       = "00000000-0000-4000-8000-000000000000"
	ceilingIdempotenceID = "11111111-1111-5111-9111-111111111111"
)

// randomHex overwrites the hex digits of the UUID text b with random ones.
func randomHex(rnd *rand.Rand, b []byte) {
	const digits = "0123456789abcdef"
	for i := range b {
		if b[i] != '-' {
			b[i] = digits[rnd.IntN(16)]
		}
	}
}

// ceilingEvent returns an MPFE and its key as the middleware writes them for a benchmark record.
func ceilingEvent(b *testing.B, topic string) (value, key []byte) {
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		b.Fatal(err)
	}
	idem := ceilingIdempotenceID
	trace := "*errors.errorString: order rejected"
	hash := fmt.Sprintf("%x", sha256.Sum256([]byte(trace)))
	ev := &avro.Event{
		Identity:  avro.Identity{EventID: ceilingEventID, IdempotenceID: idem, Created: time.Now().UTC().Truncate(time.Millisecond)},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "bench", Service: "bench"},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: topic, Partition: 3, Offset: 123456},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: avro.Unknown, Code: avro.CodeUnknownException},
		},
		Payload: avro.Payload{
			OriginalMessage:       []byte(`{"id":"order-000000","amount":1250,"currency":"CHF","items":3}`),
			OriginalKey:           []byte("order-123456"),
			ErrorMessage:          "order rejected",
			StackTrace:            &trace,
			StackTraceHash:        &hash,
			FailedMessageMetadata: &avro.Metadata{Headers: map[string][]byte{"type": []byte("OrderPlaced")}},
		},
		DomainEventVersion: avro.DomainEventVersion,
	}
	value, err = codec.EncodeEvent("bench-err", ev)
	if err != nil {
		b.Fatal(err)
	}
	key, err = codec.EncodeKey("bench-err", avro.Key{Key: idem})
	if err != nil {
		b.Fatal(err)
	}
	return value, key
}

// benchSync publishes each failure and waits for its acknowledgement before the next record.
func benchSync(b *testing.B, k *testkit.Cluster, client, topic string, n int, group string) time.Duration {
	start := time.Now()
	dlc := eh.DeadLetterConfig{ErrorTopic: "bench-err", System: "bench", Service: "bench", GroupID: group, Metrics: prometheus.NewRegistry()}
	ctx := context.Background()
	if client == "franz" {
		dl, err := franz.NewDeadLetterer(dlc, franz.Settings{Brokers: strings.Split(k.Bootstrap(), ","), ProducerOpts: []kgo.Opt{kgo.ProducerLinger(0)}})
		if err != nil {
			b.Fatal(err)
		}
		defer dl.Close(ctx)
		cl := benchFranzConsumer(b, k, topic, group, kgo.AutoCommitMarks())
		defer cl.Close()
		for got := 0; got < n; {
			for _, r := range cl.PollRecords(ctx, n-got).Records() {
				v, err := benchDecoder.Decode(topic, r.Value)
				if err != nil {
					b.Fatal(err)
				}
				if err := benchHandle(ctx, eh.Record[[]byte, []byte]{Value: v, Message: franz.Message(r)}); err == nil {
					if err := dl.Publish(ctx, r, errBench).Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				cl.MarkCommitRecords(r)
				got++
			}
		}
		return time.Since(start)
	}
	dl, err := confluent.NewDeadLetterer(dlc, confluent.Settings{Brokers: k.Bootstrap(), ProducerConfig: kafka.ConfigMap{"linger.ms": 0, "log_level": 3}})
	if err != nil {
		b.Fatal(err)
	}
	defer dl.Close(ctx)
	c := benchConfluentConsumer(b, k, topic, group, kafka.ConfigMap{"enable.auto.offset.store": false})
	defer c.Close()
	for got := 0; got < n; {
		m, ok := c.Poll(100).(*kafka.Message)
		if !ok {
			continue
		}
		v, err := benchDecoder.Decode(topic, m.Value)
		if err != nil {
			b.Fatal(err)
		}
		if err := benchHandle(ctx, eh.Record[[]byte, []byte]{Value: v, Message: confluent.Message(m)}); err == nil {
			if err := dl.Publish(ctx, m, errBench).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := c.StoreMessage(m); err != nil {
			b.Fatal(err)
		}
		got++
	}
	return time.Since(start)
}

// cpuTime returns the CPU time the process used so far (user and system, every thread: the
// clients' own threads and the in-process broker included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
