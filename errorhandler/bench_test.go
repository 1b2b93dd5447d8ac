package errorhandler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redrive/redrive/internal/testkit"
)

// BenchmarkDeadLetterVariants compares, on one in-process broker and over the same records:
//
//  1. a plain confluent-kafka-go poll loop (decode + handler inline, auto commit),
//  2. the Runner on the happy path,
//  3. the Runner dead-lettering every record (pipelined),
//  4. a loop that sends each failure synchronously and waits for the broker (the jEAP pattern).
//
// Each variant is timed from the creation of its client until every record's outcome is final,
// and all of them use the same consumer settings (the client defaults with
// auto.offset.reset=earliest). Variants 3 and 4 use the DeadLetterer's producer defaults
// (acks=all, idempotence, lz4); variant 4 sets linger.ms=0, since it waits for every MPFE
// alone and a linger would only add to each wait.
//
// It prints records/s, the process CPU time of each variant (every thread, the in-process broker
// included) and the ratios 2/1 (time), 3/2 (throughput) and 3/4 (throughput). Run it with:
//
//	go test -run '^$' -bench DeadLetterVariants -benchtime 1x ./errorhandler/
//
// EH_BENCH_RECORDS overrides the number of records (default 200000); EH_BENCH_ONLY=N (1 to 4)
// runs only variant N, e.g. under a profiler.
func BenchmarkDeadLetterVariants(b *testing.B) {
	n := 200_000
	if s := os.Getenv("EH_BENCH_RECORDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	k := testkit.Kafka(b)
	const in = "bench-in"
	k.CreateTopic(b, in, 4)
	for _, topic := range []string{"bench-err-3", "bench-err-4"} {
		k.CreateTopic(b, topic, 4)
	}
	startProduce := time.Now()
	produceBench(b, k, in, n)
	fmt.Printf("setup: produced %d records in %v\n", n, time.Since(startProduce).Round(time.Millisecond))
	b.ResetTimer()

	if only := os.Getenv("EH_BENCH_ONLY"); only != "" {
		c0 := cpuTime()
		var d time.Duration
		switch only {
		case "1":
			d = benchPlain(b, k, in, n, "plain-only")
		case "2":
			d = benchRunner(b, k, in, n, "runner-only", false)
		case "3":
			d = benchRunner(b, k, in, n, "runner-dl-only", true)
		case "4":
			d = benchSync(b, k, in, n, "sync-only")
		default:
			b.Fatalf("EH_BENCH_ONLY=%s: want 1, 2, 3 or 4", only)
		}
		fmt.Printf("variant %s: %9.0f records/s (%v, cpu %v)\n", only, float64(n)/d.Seconds(), d.Round(time.Millisecond), (cpuTime() - c0).Round(time.Millisecond))
		return
	}
	for range b.N {
		// Best of two for the two fast variants, whose ratio is tight.
		t1, c1 := bestOfTwo(func(run string) time.Duration { return benchPlain(b, k, in, n, "plain-"+run) })
		t2, c2 := bestOfTwo(func(run string) time.Duration { return benchRunner(b, k, in, n, "runner-"+run, false) })
		c := cpuTime()
		t3 := benchRunner(b, k, in, n, "runner-dl", true)
		c3 := cpuTime() - c
		c = cpuTime()
		t4 := benchSync(b, k, in, n, "sync")
		c4 := cpuTime() - c
		rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
		line := func(name string, d, cpu time.Duration) {
			fmt.Printf("%-27s %9.0f records/s (%v, process cpu %v)\n", name, rate(d), d.Round(time.Millisecond), cpu.Round(time.Millisecond))
		}
		fmt.Printf("records: %d\n", n)
		line("1 plain poll loop:", t1, c1)
		line("2 runner, happy path:", t2, c2)
		line("3 runner, all dead-letter:", t3, c3)
		line("4 sync send per failure:", t4, c4)
		fmt.Printf("ratio 2/1 time:       %.3f (target <= 1.05)\n", t2.Seconds()/t1.Seconds())
		fmt.Printf("ratio 3/2 throughput: %.3f (target >= 0.5)\n", rate(t3)/rate(t2))
		fmt.Printf("ratio 3/4 throughput: %.1f (target >= 10)\n", rate(t3)/rate(t4))
		b.ReportMetric(rate(t1), "plain-rec/s")
		b.ReportMetric(rate(t2), "runner-rec/s")
		b.ReportMetric(rate(t3), "deadletter-rec/s")
		b.ReportMetric(rate(t4), "sync-rec/s")
	}
}

// bestOfTwo runs run twice and returns the shorter time and the CPU time of that run.
func bestOfTwo(run func(name string) time.Duration) (time.Duration, time.Duration) {
	c := cpuTime()
	ta := run("a")
	ca := cpuTime() - c
	c = cpuTime()
	tb := run("b")
	cb := cpuTime() - c
	if tb < ta {
		return tb, cb
	}
	return ta, ca
}

func produceBench(b *testing.B, k *testkit.Cluster, topic string, n int) {
	p := k.ProducerWith(b, kafka.ConfigMap{"linger.ms": 20, "batch.num.messages": 10000})
	done := make(chan kafka.Event, 10000)
	errs := make(chan error, 1)
	go func() {
		var failed error
		for range n {
			ev := <-done
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil && failed == nil {
				failed = m.TopicPartition.Error
			}
		}
		errs <- failed
	}()
	value := []byte(`{"id":"order-000000","amount":1250,"currency":"CHF","items":3}`)
	for i := range n {
		msg := &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key:            []byte("order-" + strconv.Itoa(i)),
			Value:          value,
			Headers:        []kafka.Header{{Key: "type", Value: []byte("OrderPlaced")}},
		}
		for {
			err := p.Produce(msg, done)
			if err == nil {
				break
			}
			var kerr kafka.Error
			if !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull {
				b.Fatal(err)
			}
			p.Flush(10)
		}
	}
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// benchDecode and benchHandle are the work every variant does per record.
var benchDecoder = Bytes()

func benchHandle(_ context.Context, rec Record[[]byte, []byte]) error {
	if len(rec.Value) == 0 {
		return errors.New("empty order")
	}
	return nil
}

var errBench = errors.New("order rejected")

func benchPlain(b *testing.B, k *testkit.Cluster, topic string, n int, group string) time.Duration {
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
			if err := benchHandle(context.Background(), Record[[]byte, []byte]{Value: v, Message: m}); err != nil {
				b.Fatal(err)
			}
			got++
		}
	}
	return time.Since(start)
}

func benchRunner(b *testing.B, k *testkit.Cluster, topic string, n int, group string, fail bool) time.Duration {
	reg := prometheus.NewRegistry()
	var handled atomic.Int64
	start := time.Now()
	r, err := New(Config[[]byte, []byte]{
		Brokers: k.Bootstrap(), GroupID: group, Topics: []string{topic}, System: "bench", Service: "bench",
		ConsumerConfig: kafka.ConfigMap{"log_level": 3},
		ValueDecoder:   benchDecoder,
		Handler: HandlerFunc[[]byte, []byte](func(ctx context.Context, rec Record[[]byte, []byte]) error {
			if err := benchHandle(ctx, rec); err != nil {
				return err
			}
			if fail {
				return errBench
			}
			handled.Add(1)
			return nil
		}),
		ProcessPolicy:  DeadLetter,
		FloodThreshold: -1,
		DeadLetter:     DeadLetterConfig{ErrorTopic: "bench-err-3", ProducerConfig: kafka.ConfigMap{"log_level": 3}},
		Metrics:        reg,
	})
	if err != nil {
		b.Fatal(err)
	}
	met := mustMetrics(&testing.T{}, reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for {
		var final int64
		if fail {
			final = int64(testutil.ToFloat64(met.failures.WithLabelValues(string(PhaseProcess), string(OutcomeDeadLettered), topic)))
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
	return d
}

func benchSync(b *testing.B, k *testkit.Cluster, topic string, n int, group string) time.Duration {
	start := time.Now()
	dl, err := NewDeadLetterer(DeadLetterConfig{
		Brokers: k.Bootstrap(), ErrorTopic: "bench-err-4", System: "bench", Service: "bench",
		ProducerConfig: kafka.ConfigMap{"linger.ms": 0, "log_level": 3}, Metrics: prometheus.NewRegistry(),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer dl.Close(context.Background())
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
	ctx := context.Background()
	for got := 0; got < n; {
		m, ok := c.Poll(100).(*kafka.Message)
		if !ok {
			continue
		}
		v, err := benchDecoder.Decode(topic, m.Value)
		if err != nil {
			b.Fatal(err)
		}
		if err := benchHandle(ctx, Record[[]byte, []byte]{Value: v, Message: m}); err == nil {
			err = errBench
			if err := dl.Publish(ctx, m, err).Wait(ctx); err != nil {
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
