package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

func init() { commands["intake"] = benchIntake }

// benchIntake measures, in one run on one Postgres: (1) a raw COPY of N failure rows, the
// floor; (2) the end-to-end intake of N MPFEs from an in-process Kafka into Postgres; (3) a
// per-record emulation of the jEAP Error Handling Service (a transaction per event with its
// idempotence check, lookups, upsert and insert). It prints rows/s, the ratios 2/1 and 2/3,
// and the peak resident memory of each phase.
func benchIntake(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("intake", flag.ContinueOnError)
	var (
		n          = fs.Int("n", 100_000, "events per phase")
		jeapN      = fs.Int("jeap-n", 0, "events of the per-record phase (3); 0 means -n")
		valueSize  = fs.Int("value-size", 512, "bytes of each original payload")
		partitions = fs.Int("partitions", 6, "partitions of the error topic")
		batch      = fs.Int("batch", intake.DefaultBatchSize, "intake batch size")
		runs       = fs.Int("runs", 3, "runs of phases 1 and 2, alternated; phase 3 runs once")
		writers    = fs.Int("writers", intake.DefaultWriters, "intake writers (Postgres connections writing batches at once)")
		spring     = fs.Bool("spring", true, "also measure the intake of a Spring Kafka dead-letter topic (phase 2s) in each run")
		dbURL      = scratchServerFlag(fs)
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *jeapN == 0 {
		*jeapN = *n
	}
	if *n <= 0 || *jeapN <= 0 || *valueSize < 0 || *partitions <= 0 || *batch <= 0 || *runs <= 0 {
		return errors.New("-n, -jeap-n, -partitions, -batch and -runs must be positive, -value-size not negative")
	}

	pool, drop, err := scratchDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer drop()
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		return err
	}

	fmt.Printf("intake benchmark: %d events (%d in phase 3), %d-byte payloads, 2 headers, %d partitions, batch %d, %d writers, %d runs\n",
		*n, *jeapN, *valueSize, *partitions, *batch, *writers, *runs)
	events, encoded, err := intakeBenchEvents(codec, max(*n, *jeapN), *valueSize)
	if err != nil {
		return err
	}
	mpfeRecords := make([]intakeBenchRecord, *n)
	for i := range mpfeRecords {
		mpfeRecords[i] = intakeBenchRecord{key: []byte("key-" + strconv.Itoa(i)), value: encoded[i]}
	}
	var springRecords []intakeBenchRecord
	if *spring {
		springRecords = intakeSpringRecords(*n, *valueSize)
	}
	rss := intakeStartRSSSampler()
	defer rss.stop()
	// measure runs one phase on emptied tables and returns its rate, and the RSS at its start
	// and its peak.
	measure := func(name string, rows int, f func() error) (rate float64, startRSS, peakRSS int64, err error) {
		if err := intakeResetTables(ctx, pool); err != nil {
			return 0, 0, 0, err
		}
		debug.FreeOSMemory() // the RSS that follows is live memory, not freed heap kept mapped
		rss.reset()
		startRSS = rss.peak()
		cpu0 := intakeCPU()
		start := time.Now()
		if err := f(); err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		elapsed := time.Since(start)
		cpu := intakeCPU() - cpu0
		var stored int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM failures").Scan(&stored); err != nil {
			return 0, 0, 0, err
		}
		if stored != rows {
			return 0, 0, 0, fmt.Errorf("%s: %d rows stored, want %d", name, stored, rows)
		}
		rate = float64(rows) / elapsed.Seconds()
		peakRSS = rss.peak()
		fmt.Printf("  %-30s %7d rows %7.2f s %8.0f rows/s  RSS %4.0f -> peak %4.0f MiB  CPU of this process %5.2f s\n",
			name, rows, elapsed.Seconds(), rate, float64(startRSS)/(1<<20), float64(peakRSS)/(1<<20), cpu.Seconds())
		return rate, startRSS, peakRSS, nil
	}

	var copyRates, intakeRates, ratios, springRates, springRatios []float64
	var intakeRSS int64 // the largest over the runs
	dsn := pool.Config().ConnString()
	for r := 1; r <= *runs; r++ {
		fmt.Printf("run %d\n", r)
		cr, _, _, err := measure("1 raw COPY (floor)", *n, func() error { return intakeRawCopy(ctx, pool, events[:*n]) })
		if err != nil {
			return err
		}
		cluster, bootstrap, err := intakeLoadedCluster("errors", mpfeRecords, *partitions)
		if err != nil {
			return err
		}
		var workerRSS int64
		var workerCPU time.Duration
		ir, _, _, err := measure("2 intake (kfake -> Postgres)", *n, func() error {
			var err error
			workerRSS, workerCPU, err = intakeRun(ctx, dsn, cluster, bootstrap, "mpfe:errors", *n, *batch, *writers)
			return err
		})
		cluster.Close()
		if err != nil {
			return err
		}
		fmt.Printf("    intake process: peak RSS %.0f MiB, CPU %.2f s (the Kafka broker runs in the benchmark process)\n",
			float64(workerRSS)/(1<<20), workerCPU.Seconds())
		copyRates, intakeRates, ratios = append(copyRates, cr), append(intakeRates, ir), append(ratios, ir/cr)
		intakeRSS = max(intakeRSS, workerRSS)
		if !*spring {
			continue
		}
		cluster, bootstrap, err = intakeLoadedCluster("orders.DLT", springRecords, *partitions)
		if err != nil {
			return err
		}
		sr, _, _, err := measure("2s intake spring (kfake -> PG)", *n, func() error {
			var err error
			workerRSS, workerCPU, err = intakeRun(ctx, dsn, cluster, bootstrap, "spring:orders.DLT", *n, *batch, *writers)
			return err
		})
		cluster.Close()
		if err != nil {
			return err
		}
		fmt.Printf("    intake process: peak RSS %.0f MiB, CPU %.2f s\n", float64(workerRSS)/(1<<20), workerCPU.Seconds())
		springRates, springRatios = append(springRates, sr), append(springRatios, sr/ir)
	}
	jr, _, jeapRSS, err := measure("3 jEAP per-record emulation", *jeapN, func() error { return intakePerRecord(ctx, pool, codec, encoded[:*jeapN]) })
	if err != nil {
		return err
	}

	fmt.Printf("\nmedians over %d runs:\n", *runs)
	fmt.Printf("  1 raw COPY (floor)             %9.0f rows/s\n", intakeMedian(copyRates))
	fmt.Printf("  2 intake (kfake -> Postgres)   %9.0f rows/s  peak RSS of the intake process %.0f MiB\n",
		intakeMedian(intakeRates), float64(intakeRSS)/(1<<20))
	fmt.Printf("  3 jEAP per-record emulation    %9.0f rows/s  peak RSS %.0f MiB\n", jr, float64(jeapRSS)/(1<<20))
	fmt.Printf("ratio 2/1 = %.2f (median of the runs' ratios; target >= 0.8)\n", intakeMedian(ratios))
	fmt.Printf("ratio 2/3 = %.1f (target >= 10)\n", intakeMedian(intakeRates)/jr)
	if *spring {
		fmt.Printf("  2s intake spring               %9.0f rows/s\n", intakeMedian(springRates))
		fmt.Printf("ratio 2s/2 = %.2f (median of the runs' ratios; target >= 0.9)\n", intakeMedian(springRatios))
	}
	return nil
}

// intakeBenchEvents returns n distinct events, each failing its own message, spread over 20 groups,
// and their single-object encodings.
func intakeBenchEvents(codec *avro.Codec, n, valueSize int) ([]store.Incoming, [][]byte, error) {
	events := make([]store.Incoming, n)
	encoded := make([][]byte, n)
	headers := []avro.Header{
		{Name: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
		{Name: "content-type", Value: []byte("application/avro")},
	}
	trace := "java.lang.IllegalStateException: boom\n\tat ch.example.Handler.handle(Handler.java:42)\n\tat ch.example.Listener.onMessage(Listener.java:17)"
	for i := range events {
		value := make([]byte, valueSize)
		_, _ = rand.Read(value)
		temp := avro.Temporary
		if i%3 == 0 {
			temp = avro.Permanent
		}
		e := &avro.Event{
			Identity:  avro.Identity{EventID: uuid.NewString(), IdempotenceID: uuid.NewString(), Created: time.Now().UTC().Truncate(time.Millisecond)},
			Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
			Publisher: avro.Publisher{System: "shop", Service: "service-" + strconv.Itoa(i%5)},
			References: avro.References{
				Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: "orders", Partition: int32(i % 12), Offset: int64(i)},
				ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: temp, Code: "CODE_" + strconv.Itoa(i%4)},
			},
			Payload: avro.Payload{
				OriginalMessage: value, OriginalKey: []byte("order-" + strconv.Itoa(i)), ErrorMessage: "could not process the order",
				StackTrace: &trace, StackTraceHash: avro.Ptr("9f86d081"),
				FailedMessageMetadata: &avro.Metadata{EventID: avro.Ptr(uuid.NewString()), MessageTypeName: avro.Ptr("OrderPlaced"),
					MessageTypeVersion: avro.Ptr("1.0.0"), Service: avro.Ptr("checkout")},
			},
			DomainEventVersion: avro.DomainEventVersion,
		}
		if err := e.Payload.FailedMessageMetadata.SetHeaders(headers); err != nil {
			return nil, nil, err
		}
		b, err := codec.EncodeEvent("errors", e)
		if err != nil {
			return nil, nil, err
		}
		events[i], encoded[i] = store.Incoming{Event: e, Headers: headers}, b
	}
	return events, encoded, nil
}

func intakeResetTables(ctx context.Context, pool *pgxpool.Pool) error {
	for _, s := range []string{
		"TRUNCATE failure_records, failure_states, failure_not_resent, failure_keys, failure_texts, failure_revisions, failure_groups, audit_log RESTART IDENTITY",
		"CHECKPOINT",
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// intakeBenchColumns are the failure_records columns the intake writes.
var intakeBenchColumns = []string{
	"id", "created_at", "temporality", "error_code", "error_message", "error_description", "stack_trace_ref", "stack_trace_hash",
	"event_id", "idempotence_id", "event_created", "publisher_system", "publisher_service", "process_id",
	"original_topic", "original_partition", "original_offset", "original_key", "original_value", "header_names", "header_values",
	"message_id", "message_idempotence_id", "message_created", "message_system", "message_service", "message_type", "message_type_version",
	"causing_message", "attempt", "source_format",
}

// intakeBenchStateColumns are the failure_states columns the intake writes.
var intakeBenchStateColumns = []string{"id", "created_at", "group_id", "temporality", "original_topic", "state", "next_attempt_at", "updated_at"}

// intakeBenchRows returns the failure_records, failure_states and failure_keys rows of in (for
// intakeBenchColumns, intakeBenchStateColumns and the keys' columns), and the hash of its stack
// trace (nil without one).
func intakeBenchRows(in store.Incoming, groupID int64, attempt int, now time.Time) (record, state, key []any, trace []byte) {
	e, p, md := in.Event, &in.Event.Payload, in.Event.Payload.FailedMessageMetadata
	names := make([]string, len(in.Headers))
	values := make([][]byte, len(in.Headers))
	for i, h := range in.Headers {
		names[i], values[i] = h.Name, h.Value
	}
	st, next := "PERMANENT", (*time.Time)(nil)
	if e.References.ErrorType.Temporality == avro.Temporary {
		at, _ := resend.DefaultBackoff().Next(1, now)
		st, next = "RETRY_PENDING", &at
	}
	if p.StackTrace != nil {
		h := sha256.Sum256([]byte(*p.StackTrace))
		trace = h[:]
	}
	id, _ := uuid.NewV7()
	record = []any{
		id, now, string(e.References.ErrorType.Temporality), e.References.ErrorType.Code, p.ErrorMessage, p.ErrorDescription,
		trace, p.StackTraceHash, e.Identity.EventID, e.Identity.IdempotenceID, e.Identity.Created, e.Publisher.System,
		e.Publisher.Service, e.ProcessID, e.References.Message.TopicName, e.References.Message.Partition, e.References.Message.Offset,
		p.OriginalKey, p.OriginalMessage, names, values, md.EventID, md.IdempotenceID, md.Created, md.System, md.Service,
		md.MessageTypeName, md.MessageTypeVersion, redrive.CausingMessage(e, in.Headers), attempt, "mpfe",
	}
	return record, []any{id, now, groupID, string(e.References.ErrorType.Temporality), e.References.Message.TopicName, st, next, now},
		[]any{e.Identity.IdempotenceID, id, now}, trace
}

// intakeRawCopy writes the rows the intake writes, in one transaction: the distinct stack
// traces, then one COPY each into failure_records, failure_states and failure_keys. No
// duplicate check, no group lookup, nothing decoded: it is the floor the intake is measured
// against.
func intakeRawCopy(ctx context.Context, pool *pgxpool.Pool, events []store.Incoming) error {
	var group int64
	if err := pool.QueryRow(ctx, `INSERT INTO failure_groups (publisher_service, error_code) VALUES ('bench', 'BENCH') RETURNING id`).Scan(&group); err != nil {
		return err
	}
	now := time.Now()
	records, states, keys := make([][]any, len(events)), make([][]any, len(events)), make([][]any, len(events))
	traces := map[string]string{}
	for i, in := range events {
		var trace []byte
		records[i], states[i], keys[i], trace = intakeBenchRows(in, group, 1, now)
		if trace != nil {
			traces[string(trace)] = *in.Event.Payload.StackTrace
		}
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		hashes, bodies := make([][]byte, 0, len(traces)), make([]string, 0, len(traces))
		for h, b := range traces {
			hashes, bodies = append(hashes, []byte(h)), append(bodies, b)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO failure_texts (hash, body, last_used) SELECT h, b, $3 FROM unnest($1::bytea[], $2::text[]) AS u(h, b)`,
			hashes, bodies, now); err != nil {
			return err
		}
		for _, c := range []struct {
			table string
			cols  []string
			rows  [][]any
		}{
			{"failure_records", intakeBenchColumns, records},
			{"failure_states", intakeBenchStateColumns, states},
			{"failure_keys", []string{"idempotence_id", "failure_id", "created_at"}, keys},
		} {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
				return fmt.Errorf("copy into %s: %w", c.table, err)
			}
		}
		return nil
	})
}

// intakeBenchRecord is one record of a source topic.
type intakeBenchRecord struct {
	key, value []byte
	headers    []kafka.Header
}

// intakeSpringRecords returns n records as Spring Kafka's DeadLetterPublishingRecoverer writes
// them: the original key, value and two headers, then the kafka_dlt-* set with a stack trace,
// spread over 20 groups like the MPFEs of intakeBenchEvents.
func intakeSpringRecords(n, valueSize int) []intakeBenchRecord {
	out := make([]intakeBenchRecord, n)
	be := func(v uint64, size int) []byte {
		b := make([]byte, 8)
		for i := 7; i >= 0; i-- {
			b[i] = byte(v)
			v >>= 8
		}
		return b[8-size:]
	}
	for i := range out {
		value := make([]byte, valueSize)
		_, _ = rand.Read(value)
		trace := fmt.Sprintf("java.lang.IllegalStateException: boom\n\tat ch.example.Handler.handle(Handler.java:%d)\n\tat ch.example.Listener%d.onMessage(Listener.java:17)", 40+i%7, i%4)
		out[i] = intakeBenchRecord{
			key:   []byte("order-" + strconv.Itoa(i)),
			value: value,
			headers: []kafka.Header{
				{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
				{Key: "content-type", Value: []byte("application/avro")},
				{Key: "kafka_dlt-original-topic", Value: []byte("orders")},
				{Key: "kafka_dlt-original-partition", Value: be(uint64(i%12), 4)},
				{Key: "kafka_dlt-original-offset", Value: be(uint64(i), 8)},
				{Key: "kafka_dlt-original-timestamp", Value: be(uint64(time.Now().UnixMilli()), 8)},
				{Key: "kafka_dlt-original-timestamp-type", Value: []byte("CreateTime")},
				{Key: "kafka_dlt-original-consumer-group", Value: []byte("service-" + strconv.Itoa(i%5))},
				{Key: "kafka_dlt-exception-fqcn", Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
				{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte("java.lang.IllegalStateException")},
				{Key: "kafka_dlt-exception-message", Value: []byte("could not process the order")},
				{Key: "kafka_dlt-exception-stacktrace", Value: []byte(trace)},
			},
		}
	}
	return out
}

// intakeLoadedCluster starts a kfake cluster and produces the records to topic.
func intakeLoadedCluster(topic string, records []intakeBenchRecord, partitions int) (*kfake.Cluster, string, error) {
	cluster, bootstrap, err := startCluster(map[string]int{topic: partitions, "errors-dlt": 1})
	if err != nil {
		return nil, "", err
	}
	prod, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
		"enable.idempotence": true, "log_level": 3})
	if err != nil {
		cluster.Close()
		return nil, "", err
	}
	defer prod.Close()
	reports := make(chan kafka.Event, 10_000)
	var deliveryErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range records {
			if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil && deliveryErr == nil {
				deliveryErr = m.TopicPartition.Error
			}
		}
	}()
	for _, r := range records {
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: r.key, Value: r.value, Headers: r.headers}
		for {
			err := prod.Produce(msg, reports)
			var ke kafka.Error
			if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
				time.Sleep(time.Millisecond) // the producer's queue drains
				continue
			}
			if err != nil {
				cluster.Close()
				return nil, "", err
			}
			break
		}
	}
	wg.Wait()
	if deliveryErr != nil {
		cluster.Close()
		return nil, "", deliveryErr
	}
	return cluster, bootstrap, nil
}

// intakeRun runs the service's intake in a child process (`redrive-bench intake-worker`), so
// that its memory and CPU are measured apart from the in-process Kafka and the test data, until
// the group committed the end of every partition; then it stops the child, which shuts down
// gracefully. It returns the child's peak RSS and CPU time.
func intakeRun(ctx context.Context, dsn string, cluster *kfake.Cluster, bootstrap, source string, n, batch, writers int) (int64, time.Duration, error) {
	const group = "bench-intake"
	src, err := intake.ParseSource(source)
	if err != nil {
		return 0, 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.CommandContext(ctx, exe, "intake-worker", "-bootstrap", bootstrap, "-database-url", dsn,
		"-group", group, "-batch", strconv.Itoa(batch), "-writers", strconv.Itoa(writers), "-source", source)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The child's peak RSS is VmHWM of its own address space, read while it runs: rusage's
	// maxrss would include the benchmark's memory, inherited through fork before exec.
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	var peak int64
	for {
		if f, err := os.Open(status); err == nil {
			peak = max(peak, intakeParseStatus(f, "VmHWM:"))
			f.Close()
		}
		var committed int64
		if info := cluster.GroupInfo(group); info != nil {
			for _, c := range info.Commits[src.Topic] {
				committed += c.Offset
			}
		}
		if committed >= int64(n) {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := <-done; err != nil {
				return 0, 0, fmt.Errorf("intake worker: %w", err)
			}
			var cpu time.Duration
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
			return peak, cpu, nil
		}
		select {
		case err := <-done:
			return 0, 0, fmt.Errorf("intake worker stopped early: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func init() { commands["intake-worker"] = intakeWorker }

// intakeWorker runs the intake of `redrive serve` on one source (-source, default the error
// topic "errors") until SIGTERM: the child process of the intake benchmark.
func intakeWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("intake-worker", flag.ContinueOnError)
	var (
		bootstrap = fs.String("bootstrap", "", "Kafka bootstrap servers")
		dbURL     = fs.String("database-url", "", "Postgres of the failures")
		group     = fs.String("group", "bench-intake", "consumer group")
		batch     = fs.Int("batch", intake.DefaultBatchSize, "batch size")
		writers   = fs.Int("writers", intake.DefaultWriters, "writers")
		source    = fs.String("source", "mpfe:errors", "the source to read, as -source of redrive serve")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	src, err := intake.ParseSource(*source)
	if err != nil {
		return err
	}
	in, err := intake.New(intake.Config{
		Store: st, NextAttempt: resend.DefaultBackoff().Next, Bootstrap: *bootstrap,
		Sources: []intake.Source{src}, DeadLetterTopic: "errors-dlt", GroupID: *group, BatchSize: *batch, Writers: *writers,
		ConsumerConfig: kafka.ConfigMap{"log_level": 3},
		ProducerConfig: kafka.ConfigMap{"log_level": 3},
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	return in.Run(ctx) // main's context ends on SIGTERM
}

// intakePerRecord emulates the jEAP Error Handling Service: each record is decoded and stored in a
// transaction of its own that checks the idempotenceId, looks up the causing message, upserts
// the group and inserts the failure, one record after the other. Kafka and the per-record
// offset commit are left out, which favours this baseline.
func intakePerRecord(ctx context.Context, pool *pgxpool.Pool, codec *avro.Codec, encoded [][]byte) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, b := range encoded {
		e, err := codec.DecodeEvent("errors", b)
		if err != nil {
			return err
		}
		hs, err := e.Payload.FailedMessageMetadata.OriginalHeaders()
		if err != nil {
			return err
		}
		in := store.Incoming{Event: e, Headers: hs}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM failure_keys WHERE idempotence_id = $1)`, e.Identity.IdempotenceID).Scan(&exists); err != nil || exists {
				return err
			}
			var previous int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM failure_records WHERE causing_message = $1`, redrive.CausingMessage(e, hs)).Scan(&previous); err != nil {
				return err
			}
			var group int64
			if err := tx.QueryRow(ctx, `INSERT INTO failure_groups AS g (publisher_service, message_type, error_code, stack_trace_hash)
				VALUES ($1, $2, $3, $4) ON CONFLICT ON CONSTRAINT failure_groups_kind_key DO UPDATE SET last_seen = now()
				RETURNING g.id`, e.Publisher.Service, *e.Payload.FailedMessageMetadata.MessageTypeName, e.References.ErrorType.Code,
				*e.Payload.StackTraceHash).Scan(&group); err != nil {
				return err
			}
			record, state, key, trace := intakeBenchRows(in, group, previous+1, time.Now())
			if trace != nil {
				if _, err := tx.Exec(ctx, `INSERT INTO failure_texts (hash, body, last_used) VALUES ($1, $2, now()) ON CONFLICT DO NOTHING`,
					trace, *e.Payload.StackTrace); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, intakeInsertOne("failure_keys", []string{"idempotence_id", "failure_id", "created_at"}), key...); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, intakeInsertOne("failure_records", intakeBenchColumns), record...); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, intakeInsertOne("failure_states", intakeBenchStateColumns), state...)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// intakeInsertOne returns the INSERT of one row into table's columns.
func intakeInsertOne(table string, columns []string) string {
	ph := make([]string, len(columns))
	for i := range ph {
		ph[i] = "$" + strconv.Itoa(i+1)
	}
	return "INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
}

// intakeRSSSampler records the peak resident set size of the process, sampled every 50ms.
type intakeRSSSampler struct {
	mu   sync.Mutex
	max  int64
	done chan struct{}
}

func intakeStartRSSSampler() *intakeRSSSampler {
	s := &intakeRSSSampler{done: make(chan struct{})}
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if v := intakeReadRSS(); v > 0 {
					s.mu.Lock()
					s.max = max(s.max, v)
					s.mu.Unlock()
				}
			}
		}
	}()
	return s
}

func (s *intakeRSSSampler) reset() { s.mu.Lock(); s.max = intakeReadRSS(); s.mu.Unlock() }
func (s *intakeRSSSampler) peak() int64 {
	v := intakeReadRSS()
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.max, v)
}
func (s *intakeRSSSampler) stop() { close(s.done) }

// intakeReadRSS returns the process's resident set size in bytes (VmRSS), or 0 where /proc is missing.
func intakeReadRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	return intakeParseStatus(f, "VmRSS:")
}

// intakeParseStatus returns the size in bytes on the line of /proc/PID/status named field.
func intakeParseStatus(r io.Reader, field string) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte(field)); ok {
			fields := strings.Fields(string(rest))
			if len(fields) >= 1 {
				kb, _ := strconv.ParseInt(fields[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func intakeMedian(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// intakeCPU returns the user and system CPU time this process has used.
func intakeCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
