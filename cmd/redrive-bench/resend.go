package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

func init() { commands["resend"] = benchResend }

// benchResend measures a bulk resend of stored failures (records/s until every record is
// acknowledged, and until every failure is marked RESENT) against a plain confluent-kafka-go producer
// sending the same records, in the same run, to the same cluster.
func benchResend(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("resend", flag.ContinueOnError)
	var (
		n           = fs.Int("n", 10000, "stored failures to resend per run")
		valueSize   = fs.Int("value-size", 1024, "bytes per record value")
		partitions  = fs.Int("partitions", 6, "partitions of the benchmark topics")
		runs        = fs.Int("runs", 3, "runs; each resends -n fresh failures and sends -n plain records")
		batch       = fs.Int("batch", resend.DefaultBatchSize, "scheduler claim batch size")
		concurrency = fs.Int("concurrency", resend.DefaultConcurrency, "scheduler batches in flight")
		dbURL       = scratchServerFlag(fs)
		brokers     = fs.String("brokers", "", "Kafka bootstrap servers; empty starts an in-process kfake cluster")
		fillfactor  = fs.Int("fillfactor", 0, "set the failures table's fillfactor before the runs (0 keeps the table's, 100 by default)")
		cpuProfile  = fs.String("cpuprofile", "", "write a CPU profile of this process over the measured windows of the resend (until every record is acknowledged) to this file")
		timings     = fs.Bool("timings", false, "print CPU times and the scheduler's claim, load, send and mark histograms after each run")
		traceSQL    = fs.Bool("trace-sql", false, "print, per statement, the calls and their time over the measured windows of all runs")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *runs <= 0 || *valueSize < 0 || *partitions <= 0 {
		return errors.New("-n, -runs and -partitions must be positive, -value-size not negative")
	}

	var tracer pgx.QueryTracer
	if *traceSQL {
		resendTrace = newSQLTrace()
		tracer = resendTrace
	}
	pool, drop, err := scratchDatabaseTraced(ctx, *dbURL, 0, tracer)
	if err != nil {
		return err
	}
	defer drop()
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	if *fillfactor != 0 {
		// Every partition of the states (the only rows a resend updates), the default one too.
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DO $$ DECLARE p regclass; BEGIN
			FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'failure_states'::regclass LOOP
				EXECUTE format('ALTER TABLE %%s SET (fillfactor = %d)', p);
			END LOOP; END $$`, *fillfactor)); err != nil {
			return fmt.Errorf("set fillfactor: %w", err)
		}
	}

	bootstrap := *brokers
	if bootstrap == "" {
		cluster, addrs, err := startCluster(map[string]int{"bench-plain": *partitions, "bench-resend": *partitions})
		if err != nil {
			return err
		}
		defer cluster.Close()
		bootstrap = addrs
	}

	fmt.Printf("resend benchmark: %d records of %d bytes, 3 stored headers, %d partitions, batch %d, concurrency %d\n",
		*n, *valueSize, *partitions, *batch, *concurrency)
	fmt.Println("acked: records/s until the broker acknowledged every resent record; marked: until every failure is RESENT")
	fmt.Printf("%-5s %12s %12s %7s %12s %7s\n", "run", "plain rec/s", "acked rec/s", "ratio", "marked rec/s", "ratio")
	var plains, ackeds, markeds, ackRatios, markRatios []float64
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		resendProfile = f
	}
	for r := 1; r <= *runs; r++ {
		res, err := resendScheduler(ctx, pool, st, bootstrap, "bench-resend", *n, *valueSize, r, *batch, *concurrency, *timings,
			func() (time.Duration, error) { return resendPlainProducer(bootstrap, "bench-plain", *n, *valueSize, r) })
		if err != nil {
			return err
		}
		pr, ar, mr := float64(*n)/res.plain.Seconds(), float64(*n)/res.acked.Seconds(), float64(*n)/res.marked.Seconds()
		plains, ackeds, markeds = append(plains, pr), append(ackeds, ar), append(markeds, mr)
		ackRatios, markRatios = append(ackRatios, ar/pr), append(markRatios, mr/pr)
		fmt.Printf("%-5d %12.0f %12.0f %7.2f %12.0f %7.2f\n", r, pr, ar, ar/pr, mr, mr/pr)
	}
	fmt.Printf("%-5s %12.0f %12.0f %7.2f %12.0f %7.2f\n", "med", resendMedian(plains), resendMedian(ackeds),
		resendMedian(ackRatios), resendMedian(markeds), resendMedian(markRatios))
	// The two producers' run-to-run noise is independent, so a ratio of one run's figures
	// scatters more than either; the ratio of the medians is the steadier estimate.
	fmt.Printf("ratio of the medians: acked %.2f, marked %.2f\n",
		resendMedian(ackeds)/resendMedian(plains), resendMedian(markeds)/resendMedian(plains))
	if resendTrace != nil {
		resendTrace.report(*n * *runs)
	}
	if *timings {
		return resendUpdateStats(ctx, pool)
	}
	return nil
}

// resendTrace, when set, sums the statements of the measured windows (-trace-sql): from the
// moment the failures are due until every one is marked, over all runs.
var resendTrace *sqlTrace

// resendUpdateStats prints how many updates of the failure states were HOT (wrote no index
// entry) over all the runs, warm-up included: claims (lease writes) and marks. Backends report
// their statistics within about a second of going idle, so it waits that long first.
func resendUpdateStats(ctx context.Context, pool *pgxpool.Pool) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	var upd, hot int64
	if err := pool.QueryRow(ctx, `
		SELECT coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables
		WHERE relname LIKE 'failure\_states\_%'`).Scan(&upd, &hot); err != nil {
		return fmt.Errorf("update statistics: %w", err)
	}
	fmt.Printf("failure_states updates: %d, of which HOT: %d (%.0f %%)\n", upd, hot, 100*float64(hot)/float64(max(upd, 1)))
	return nil
}

// resendWarmup is how many records each side sends before the clock starts: both producers have
// connected, fetched the topic's metadata and got their producer id.
const resendWarmup = 200

// resendBenchHeaders are the stored headers of every benchmark record, as a consumer's would be.
var resendBenchHeaders = []kafka.Header{
	{Key: "trace-id", Value: []byte("0af7651916cd43dd8448eb211c80319c")},
	{Key: "content-type", Value: []byte("application/avro")},
	{Key: "trace-id", Value: []byte("b7ad6b7169203331")},
}

// resendPlainProducer sends n records like the resent ones (same key, value and headers, including
// the three resend headers) with an idempotent acks=all producer and returns the time until
// the last acknowledgement.
func resendPlainProducer(bootstrap, topic string, n, valueSize, run int) (time.Duration, error) {
	cfg := kafka.ConfigMap{
		"bootstrap.servers":         bootstrap,
		"enable.idempotence":        true,
		"acks":                      "all",
		"linger.ms":                 5,
		"partitioner":               resend.DefaultPartitioner,
		"go.delivery.report.fields": "none",
		"log_level":                 3,
	}
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		return 0, fmt.Errorf("plain producer: %w", err)
	}
	defer p.Close()
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = 'x'
	}
	send := func(label string, count int) error {
		reports := make(chan kafka.Event, count)
		for i := 1; i <= count; i++ {
			id := fmt.Sprintf("%s-%d", label, i)
			v := append([]byte(nil), value...)
			copy(v, "v"+id)
			hs := append(append([]kafka.Header(nil), resendBenchHeaders...),
				kafka.Header{Key: "jeap_eh_target_service", Value: []byte("bench-service")},
				kafka.Header{Key: "jeap_eh_error_handling_service", Value: []byte(resend.DefaultServiceName)},
				kafka.Header{Key: "redrive-origin", Value: []byte("bench-" + id)})
			msg := &kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
				Key:            []byte("key-" + id), Value: v, Headers: hs,
			}
			for {
				err := p.Produce(msg, reports)
				if err == nil {
					break
				}
				var kerr kafka.Error
				if !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull {
					return fmt.Errorf("plain produce: %w", err)
				}
				time.Sleep(time.Millisecond)
			}
		}
		for i := 0; i < count; i++ {
			if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
				return fmt.Errorf("plain delivery: %w", m.TopicPartition.Error)
			}
		}
		return nil
	}
	if err := send(fmt.Sprintf("w%d", run), resendWarmup); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := send(fmt.Sprintf("r%d", run), n); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// resendProfile, when set, receives a CPU profile of the next run's resend until every record
// is acknowledged.
var resendProfile *os.File

// resendTimes are the durations of one run: the plain producer's, and those of the bulk resend
// from the moment the failures are due.
type resendTimes struct {
	plain  time.Duration // the plain producer, until its last acknowledgement
	acked  time.Duration // until the broker acknowledged every resent record
	marked time.Duration // until every failure is marked RESENT
}

// resendScheduler stores n failures that are due in an hour, starts a Scheduler, and measures
// plain (the plain producer) and then the bulk resend: the scheduler's clock jumps an hour ahead,
// and it returns the times until every record was acknowledged and until every failure was
// marked RESENT. Both sides start from the same quiet database: the stored failures are
// vacuumed and checkpointed first (as failures are, in the time between their failure and their
// resend), so neither side pays for the work that the previous run left to autovacuum.
func resendScheduler(ctx context.Context, pool *pgxpool.Pool, st *store.Store, bootstrap, topic string, n, valueSize, run, batch, concurrency int, timings bool, plain func() (time.Duration, error)) (resendTimes, error) {
	reg := prometheus.NewRegistry()
	var ahead atomic.Int64 // nanoseconds added to the scheduler's clock
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	s, err := resend.New(resend.Config{
		Store:        st,
		Brokers:      bootstrap,
		Producer:     kafka.ConfigMap{"log_level": 3},
		Interval:     10 * time.Millisecond,
		BatchSize:    batch,
		Concurrency:  concurrency,
		Housekeeping: resend.HousekeepingConfig{Disable: true},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer:   reg,
		Now:          clock,

		TracerProvider: resendTracerProvider, // the tracing benchmark's
	})
	if err != nil {
		return resendTimes{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	// Poll the scheduler's counters, not the database, so that measuring adds no load:
	// redrive_resend_acknowledged_total grows when a batch is acknowledged, redrive_resend_total
	// {outcome="resent"} when its failures are marked RESENT.
	counter := func(name string, labels map[string]string) int {
		mfs, err := reg.Gather()
		if err != nil {
			return 0
		}
		total := 0.0
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		metric:
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
						continue metric
					}
				}
				total += m.GetCounter().GetValue()
			}
		}
		return int(total)
	}
	acked := func() int {
		return counter("redrive_resend_acknowledged_total", map[string]string{"trigger": resend.TriggerAuto})
	}
	resent := func() int {
		return counter("redrive_resend_total", map[string]string{"trigger": resend.TriggerAuto, "outcome": string(redrive.OutcomeResent)})
	}
	// Every 5 ms: gathering the registry every millisecond took 41 % of this process's CPU
	// during the resend (a CPU profile of 2026-12-02), CPU that the scheduler being measured
	// shares and the plain producer did not.
	wait := func(count func() int, want int) error {
		deadline := time.Now().Add(5 * time.Minute)
		for count() < want {
			if time.Now().After(deadline) {
				return fmt.Errorf("resend: %d of %d records after 5 minutes", count(), want)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	}
	if err := resendInsertDue(ctx, pool, topic, fmt.Sprintf("r%d", run), n, valueSize, time.Hour); err != nil {
		return resendTimes{}, err
	}
	if err := resendInsertDue(ctx, pool, topic, fmt.Sprintf("w%d", run), resendWarmup, valueSize, 0); err != nil {
		return resendTimes{}, err
	}
	if err := wait(resent, resendWarmup); err != nil {
		return resendTimes{}, err
	}
	var el resendTimes
	if err := resendQuiesce(ctx, pool); err != nil {
		return el, err
	}
	if el.plain, err = plain(); err != nil {
		return el, err
	}
	before := resendHistograms(reg)
	cpu0 := resendCPU(ctx, pool)
	if resendProfile != nil {
		if err := pprof.StartCPUProfile(resendProfile); err != nil {
			return el, err
		}
	}
	if resendTrace != nil {
		resendTrace.resume()
	}
	start := time.Now()
	ahead.Store(int64(time.Hour + time.Second)) // the failures are due from now on
	if err := wait(acked, resendWarmup+n); err != nil {
		return el, err
	}
	el.acked = time.Since(start)
	if resendProfile != nil {
		pprof.StopCPUProfile()
		resendProfile = nil // one window: a profile file holds one profile
	}
	if err := wait(resent, resendWarmup+n); err != nil {
		return el, err
	}
	el.marked = time.Since(start)
	if resendTrace != nil {
		resendTrace.stop()
	}
	if timings {
		cpu1 := resendCPU(ctx, pool)
		fmt.Printf("  cpu during the resend: this process %.2f s, its database backends %.2f s, wall %.2f s\n",
			(cpu1.self - cpu0.self).Seconds(), (cpu1.backends - cpu0.backends).Seconds(), el.marked.Seconds())
		// Only what the run itself did: the idle rounds before it are subtracted.
		after := resendHistograms(reg)
		names := make([]string, 0, len(after))
		for name := range after {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			a, b := after[name], before[name]
			fmt.Printf("  %s: %d observations, %.3f s in all\n", name, a.count-b.count, a.sum-b.sum)
		}
	}
	return el, nil
}

// resendHistogram is the count and sum of a histogram.
type resendHistogram struct {
	count uint64
	sum   float64
}

// resendHistograms returns the scheduler's histograms by name.
func resendHistograms(reg *prometheus.Registry) map[string]resendHistogram {
	out := map[string]resendHistogram{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				out[mf.GetName()] = resendHistogram{count: h.GetSampleCount(), sum: h.GetSampleSum()}
			}
		}
	}
	return out
}

// resendQuiesce vacuums and analyzes the failure tables.
func resendQuiesce(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) failure_records, failure_states, failure_not_resent, failure_keys`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// resendInsertDue stores n RETRY_PENDING failures due in the given time, whose originals are
// like the plain records.
func resendInsertDue(ctx context.Context, pool *pgxpool.Pool, topic, label string, n, valueSize int, in time.Duration) error {
	var groupID int64
	if err := pool.QueryRow(ctx, `
		INSERT INTO failure_groups (publisher_service, error_code) VALUES ('bench-service', 'TIMEOUT')
		ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
		RETURNING id`).Scan(&groupID); err != nil {
		return fmt.Errorf("insert group: %w", err)
	}
	names := make([]string, len(resendBenchHeaders))
	values := make([][]byte, len(resendBenchHeaders))
	for i, h := range resendBenchHeaders {
		names[i], values[i] = h.Key, h.Value
	}
	// The record, state and key of each failure, as the intake writes them (migration 020).
	_, err := pool.Exec(ctx, `
		WITH f AS (
			SELECT gen_random_uuid() AS id, now() AS created_at, gen_random_uuid()::text AS idem, i
			FROM generate_series(1, $2) AS i
		), records AS (
			INSERT INTO failure_records (id, created_at, temporality, error_code, error_message, event_id, idempotence_id,
				event_created, publisher_system, publisher_service, original_topic, original_partition,
				original_offset, original_key, original_value, header_names, header_values, causing_message,
				attempt, source_format)
			SELECT id, created_at, 'TEMPORARY', 'TIMEOUT', 'boom', gen_random_uuid()::text, idem,
				now(), 'bench', 'bench-service', $1, 0, i,
				convert_to('key-' || $5::text || '-' || i, 'UTF8'),
				convert_to(rpad('v' || $5::text || '-' || i, $3, 'x'), 'UTF8'),
				$6, $7, 'bench-' || $5::text || '-' || i, 1, 'mpfe'
			FROM f
		), keys AS (
			INSERT INTO failure_keys (idempotence_id, failure_id, created_at) SELECT idem, id, created_at FROM f
		)
		INSERT INTO failure_states (id, created_at, group_id, temporality, original_topic, state, next_attempt_at, updated_at)
		SELECT id, created_at, $4, 'TEMPORARY', $1, 'RETRY_PENDING', $8::timestamptz, created_at FROM f`,
		topic, n, valueSize, groupID, label, names, values, time.Now().Add(in-time.Second))
	if err != nil {
		return fmt.Errorf("insert %d failures: %w", n, err)
	}
	return nil
}

func resendMedian(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// resendCPUTimes are CPU times (user + system) consumed so far.
type resendCPUTimes struct {
	self     time.Duration // by this process
	backends time.Duration // by the database's backends that are connected now (Linux, same host)
}

// resendCPU reads the CPU times of this process and of the database's backends from /proc. A
// backend it cannot read counts 0.
func resendCPU(ctx context.Context, pool *pgxpool.Pool) resendCPUTimes {
	var out resendCPUTimes
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return out
	}
	pids, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses: utime and stime are the
		// 12th and 13th of them, in clock ticks (100 per second on Linux).
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out.backends += time.Duration(u+st) * 10 * time.Millisecond
	}
	return out
}
