package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

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
//
// Each variant is timed from the creation of its client until every record's outcome is
// final; plain and runner are best of two. It prints records/s, the process CPU time of each
// variant and the ratios runner/plain (time), dl/runner and dl/sync (throughput) per client.
// Run it with:
//
//	go test -run '^$' -bench DeadLetterVariants -benchtime 1x ./errorhandler/internal/conformance/
//
// EH_BENCH_RECORDS overrides the number of records (default 200000), EH_BENCH_SYNC_RECORDS
// the number the slow sync variants handle (default 20000; their rate is what counts);
// EH_BENCH_ONLY=<client>-<variant> (e.g. franz-runner) runs one variant, e.g. under a profiler.
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
	best := func(client, variant string) (time.Duration, time.Duration) {
		ta, ca := run(client, variant, n)
		tb, cb := run(client, variant, n)
		if tb < ta {
			return tb, cb
		}
		return ta, ca
	}
	for range b.N {
		fmt.Printf("records: %d (sync variants: %d)\n", n, nSync)
		rate := func(records int, d time.Duration) float64 { return float64(records) / d.Seconds() }
		for _, client := range []string{"franz", "confluent"} {
			tPlain, cPlain := best(client, "plain")
			tRunner, cRunner := best(client, "runner")
			tDL, cDL := run(client, "dl", n)
			tSync, cSync := run(client, "sync", nSync)
			line := func(name string, records int, d, cpu time.Duration) {
				fmt.Printf("%-10s %-7s %9.0f records/s (%v, process cpu %v)\n", client, name, rate(records, d), d.Round(time.Millisecond), cpu.Round(time.Millisecond))
			}
			line("plain", n, tPlain, cPlain)
			line("runner", n, tRunner, cRunner)
			line("dl", n, tDL, cDL)
			line("sync", nSync, tSync, cSync)
			fmt.Printf("%-10s runner/plain time:     %.3f (target <= 1.05)\n", client, tRunner.Seconds()/tPlain.Seconds())
			fmt.Printf("%-10s dl/runner throughput:  %.3f (target >= 0.5)\n", client, rate(n, tDL)/rate(n, tRunner))
			fmt.Printf("%-10s dl/sync throughput:    %.1f (target >= 10)\n", client, rate(n, tDL)/rate(nSync, tSync))
			b.ReportMetric(rate(n, tPlain), client+"-plain-rec/s")
			b.ReportMetric(rate(n, tRunner), client+"-runner-rec/s")
			b.ReportMetric(rate(n, tDL), client+"-deadletter-rec/s")
			b.ReportMetric(rate(nSync, tSync), client+"-sync-rec/s")
		}
	}
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

func produceBench(b *testing.B, k *testkit.Cluster, topic string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.Bootstrap(), ",")...), kgo.ProducerLinger(20*time.Millisecond),
		kgo.MaxBufferedRecords(50_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := []byte(`{"id":"order-000000","amount":1250,"currency":"CHF","items":3}`)
	var failed atomic.Pointer[error]
	for i := range n {
		rec := &kgo.Record{Topic: topic, Key: []byte("order-" + strconv.Itoa(i)), Value: value,
			Headers: []kgo.RecordHeader{{Key: "type", Value: []byte("OrderPlaced")}}}
		cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.Bootstrap(), ",")...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
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
			got++
		})
	}
	return time.Since(start)
}

func benchConfluentPlain(b *testing.B, k *testkit.Cluster, topic string, n int, group string) time.Duration {
	start := time.Now()
	cfg := kafka.ConfigMap{"bootstrap.servers": k.Bootstrap(), "group.id": group, "auto.offset.reset": "earliest", "log_level": 3}
	c, err := kafka.NewConsumer(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		b.Fatal(err)
	}
	for got := 0; got < n; {
		if m, ok := c.Poll(100).(*kafka.Message); ok {
			v, err := benchDecoder.Decode(topic, m.Value)
			if err != nil {
				b.Fatal(err)
			}
			if err := benchHandle(context.Background(), eh.Record[[]byte, []byte]{Value: v, Message: confluent.Message(m)}); err != nil {
				b.Fatal(err)
			}
			got++
		}
	}
	return time.Since(start)
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
	var r runner
	var err error
	if client == "franz" {
		r, err = franz.New(cfg, franz.Settings{Brokers: strings.Split(k.Bootstrap(), ",")})
	} else {
		r, err = confluent.New(cfg, confluent.Settings{Brokers: k.Bootstrap(),
			ConsumerConfig: kafka.ConfigMap{"log_level": 3}, ProducerConfig: kafka.ConfigMap{"log_level": 3}})
	}
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	labels := map[string]string{"phase": string(eh.PhaseProcess), "outcome": string(eh.OutcomeDeadLettered), "topic": topic}
	for {
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
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.Bootstrap(), ",")...), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks())
		if err != nil {
			b.Fatal(err)
		}
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
	cfg := kafka.ConfigMap{"bootstrap.servers": k.Bootstrap(), "group.id": group, "auto.offset.reset": "earliest",
		"enable.auto.offset.store": false, "log_level": 3}
	c, err := kafka.NewConsumer(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		b.Fatal(err)
	}
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
