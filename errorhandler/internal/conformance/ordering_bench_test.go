package conformance

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
	"github.com/redrive/redrive/errorhandler/franz"
	"github.com/redrive/redrive/internal/testkit"
)

// benchKeys is the number of distinct keys of the ordering benchmark's records.
const benchKeys = 1000

// BenchmarkOrderingGuard compares, for each client on one in-process broker and over the same
// records (benchKeys keys), the Runner without and with the ordering guard:
//
//	off/happy  no guard, every record handled
//	on/happy   guard on, every record handled (the guard's cost on the happy path)
//	off/1%     no guard, the records of 1% of the keys fail and are dead-lettered
//	on/1%      guard on, same failures: each failing key's first record is dead-lettered as
//	           the head, every later one parked behind it (its state written to the
//	           compacted store topic with acks=all before its offset may be committed)
//
// Each variant is timed from the creation of its client until every record's outcome is
// final (and from the first record handled); the variants run interleaved, EH_BENCH_REPS
// times each (default 3, the order of on and off alternating), and each on/off ratio is taken
// within a repetition: the benchmark prints the median and the values of each. Run it with:
//
//	go test -run '^$' -bench OrderingGuard -benchtime 1x ./errorhandler/internal/conformance/
//
// EH_BENCH_RECORDS overrides the number of records (default 50000).
func BenchmarkOrderingGuard(b *testing.B) {
	n := envInt(b, "EH_BENCH_RECORDS", 50_000)
	k := testkit.Kafka(b)
	const in = "bench-ordered"
	k.CreateTopic(b, in, 4)
	k.CreateTopic(b, "bench-err", 4)
	produceKeyed(b, k, in, n)
	b.ResetTimer()
	group := 0
	for range b.N {
		fmt.Printf("records: %d over %d keys\n", n, benchKeys)
		for _, client := range []string{"franz", "confluent"} {
			variants := []struct {
				name        string
				guard, fail bool
			}{{"off/happy", false, false}, {"on/happy", true, false}, {"off/1%", false, true}, {"on/1%", true, true}}
			reps := envInt(b, "EH_BENCH_REPS", 3)
			t := make([][]time.Duration, len(variants))
			after := make([][]time.Duration, len(variants))
			cpu := make([][]time.Duration, len(variants))
			for r := range reps {
				// Interleaved, and the order of on and off alternates between repetitions, so
				// that neither always runs first.
				order := []int{0, 1, 2, 3}
				if r%2 == 1 {
					order = []int{1, 0, 3, 2}
				}
				for _, i := range order {
					v := variants[i]
					group++
					c := cpuTime()
					d, first := benchOrdered(b, k, client, in, n, fmt.Sprintf("%s-ordering-%d", client, group), v.guard, v.fail)
					c = cpuTime() - c
					t[i], after[i], cpu[i] = append(t[i], d), append(after[i], d-first), append(cpu[i], c)
				}
			}
			for i, v := range variants {
				rates := make([]float64, reps)
				for r := range reps {
					rates[r] = float64(n) / t[i][r].Seconds()
				}
				fmt.Printf("%-10s %-10s %9.0f records/s median [%s] (process cpu median %v; from the first record handled, median %v)\n", client, v.name,
					median(rates), spread(rates, "%.0f"), medianDuration(cpu[i]).Round(time.Millisecond), medianDuration(after[i]).Round(time.Millisecond))
				b.ReportMetric(median(rates), client+"-"+strings.ReplaceAll(v.name, "/", "-")+"-rec/s")
			}
			ratio := func(x [][]time.Duration, on, off int) []float64 {
				out := make([]float64, reps)
				for r := range reps {
					out[r] = x[on][r].Seconds() / x[off][r].Seconds()
				}
				return out
			}
			for _, c := range []struct {
				name    string
				on, off int
				note    string
			}{{"happy path", 1, 0, "(target <= 1.02)"}, {"1% failing keys", 3, 2, ""}} {
				wall, from, byCPU := ratio(t, c.on, c.off), ratio(after, c.on, c.off), ratio(cpu, c.on, c.off)
				fmt.Printf("%-10s guard on/off, %s: time %.3f [%s], from the first record %.3f [%s], process cpu %.3f [%s] %s\n", client, c.name,
					median(wall), spread(wall, "%.3f"), median(from), spread(from, "%.3f"), median(byCPU), spread(byCPU, "%.3f"), c.note)
			}
		}
	}
}

// produceKeyed writes n records to topic with keys order-<i mod benchKeys>.
func produceKeyed(b *testing.B, k *testkit.Cluster, topic string, n int) {
	produceRecords(b, k, n, func(i int, value []byte) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("order-" + strconv.Itoa(i%benchKeys)), Value: value}
	})
}

// benchFailingKey reports whether key is one of the 1% failing keys (order-0, order-100, ...).
func benchFailingKey(key []byte) bool {
	i, err := strconv.Atoi(strings.TrimPrefix(string(key), "order-"))
	return err == nil && i%100 == 0
}

// benchOrdered runs a Runner of client over the n records of topic until every outcome is
// final and returns the time taken, and the time until the first record was handled (the group's
// join and, with the guard, the store's first read).
func benchOrdered(b *testing.B, k *testkit.Cluster, client, topic string, n int, group string, guard, fail bool) (time.Duration, time.Duration) {
	reg := prometheus.NewRegistry()
	var handled, first atomic.Int64
	start := time.Now()
	cfg := eh.Config[[]byte, []byte]{
		GroupID: group, Topics: []string{topic}, System: "bench", Service: "bench",
		ValueDecoder: benchDecoder,
		Handler: eh.HandlerFunc[[]byte, []byte](func(ctx context.Context, rec eh.Record[[]byte, []byte]) error {
			if err := benchHandle(ctx, rec); err != nil {
				return err
			}
			if fail && benchFailingKey(rec.Message.Key) {
				return errBench
			}
			if handled.Add(1) == 1 {
				first.Store(int64(time.Since(start)))
			}
			return nil
		}),
		ProcessPolicy:  eh.DeadLetter,
		FloodThreshold: -1,
		DeadLetter:     eh.DeadLetterConfig{ErrorTopic: "bench-err"},
		Metrics:        reg,
	}
	if guard {
		fs, cs := benchSettings(k)
		// One state topic per consumer group, as in production.
		stateTopic := group + "-ordering"
		k.CreateTopic(b, stateTopic, 1)
		var st orderingStore
		var err error
		if client == "franz" {
			st, err = franz.NewOrderingStore(fs, stateTopic)
		} else {
			st, err = confluent.NewOrderingStore(cs, stateTopic)
		}
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		cfg.Ordering = eh.Ordering{Topics: []string{topic}, Store: st}
	}
	r := newBenchRunner(b, k, client, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	labels := map[string]string{"phase": string(eh.PhaseProcess), "outcome": string(eh.OutcomeDeadLettered), "topic": topic}
	deadline := time.Now().Add(5 * time.Minute)
	for handled.Load()+int64(metricValue(reg, "redrive_errorhandler_failures_total", labels)) < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("%s: outcomes not final within 5 minutes", group)
		}
		time.Sleep(2 * time.Millisecond)
	}
	d := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return d, time.Duration(first.Load())
}
