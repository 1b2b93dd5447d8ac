package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/internal/telemetry"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

func init() { commands["tracing"] = benchTracing }

// resendTracerProvider, when set, is the TracerProvider of the next resendScheduler.
var resendTracerProvider trace.TracerProvider

// countingExporter counts the spans the batch span processor hands it (and those with an
// error status: failed sends) and drops them.
type countingExporter struct{ spans, failed atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	for _, s := range spans {
		if s.Status().Code == codes.Error {
			e.failed.Add(1)
		}
	}
	return nil
}
func (*countingExporter) Shutdown(context.Context) error { return nil }

// benchTracing measures the intake and the resend with tracing off and on (every span sampled,
// exported through the batch span processor to an exporter that drops them), side by side in
// each run, alternating which goes first: records/s of each and the ratio on/off. Each
// measurement starts from empty failure tables: the intake phase leaves behind the failures it
// stored (two thirds of them RETRY_PENDING, their originals on a topic the resend's cluster does
// not have), which the resend's clock, an hour ahead, would find due and fail to send.
func benchTracing(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tracing", flag.ContinueOnError)
	var (
		n           = fs.Int("n", 20000, "records per measurement")
		valueSize   = fs.Int("value-size", 512, "bytes of each payload")
		partitions  = fs.Int("partitions", 6, "partitions of the topics")
		runs        = fs.Int("runs", 3, "runs; each measures both sides of both phases")
		batch       = fs.Int("batch", intake.DefaultBatchSize, "intake batch size")
		writers     = fs.Int("writers", intake.DefaultWriters, "intake writers")
		resendBatch = fs.Int("resend-batch", resend.DefaultBatchSize, "scheduler claim batch size")
		concurrency = fs.Int("concurrency", resend.DefaultConcurrency, "scheduler batches in flight")
		phases      = fs.String("phases", "intake,resend", "phases to measure: intake, resend or both")
		dbURL       = scratchServerFlag(fs)
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 || *runs <= 0 || *valueSize < 0 || *partitions <= 0 {
		return errors.New("-n, -runs and -partitions must be positive, -value-size not negative")
	}
	doIntake, doResend := false, false
	for _, p := range splitComma(*phases) {
		switch p {
		case "intake":
			doIntake = true
		case "resend":
			doResend = true
		default:
			return fmt.Errorf("-phases: unknown phase %q", p)
		}
	}
	pool, drop, err := scratchDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer drop()
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		return err
	}
	_, encoded, err := intakeBenchEvents(codec, *n, *valueSize)
	if err != nil {
		return err
	}
	records := make([]intakeBenchRecord, *n)
	for i := range records {
		records[i] = intakeBenchRecord{key: []byte("key-" + strconv.Itoa(i)), value: encoded[i]}
	}

	fmt.Printf("tracing benchmark: %d records of %d bytes, %d partitions, intake batch %d and %d writers, resend batch %d and concurrency %d, %d runs\n",
		*n, *valueSize, *partitions, *batch, *writers, *resendBatch, *concurrency, *runs)
	fmt.Println("on: OpenTelemetry SDK, always sampled, batch span processor, an exporter that drops the spans")
	var intakeOff, intakeOn, resendOff, resendOn []float64
	seq := 0
	for r := 1; r <= *runs; r++ {
		order := []bool{false, true}
		if r%2 == 0 {
			order = []bool{true, false}
		}
		for _, on := range order {
			label := map[bool]string{false: "off", true: "on"}[on]
			if doIntake {
				rate, spans, err := tracingIntake(ctx, pool, st, records, *partitions, *batch, *writers, on)
				if err != nil {
					return err
				}
				fmt.Printf("run %d intake tracing %-3s %8.0f rec/s  %6d spans\n", r, label, rate, spans)
				if on {
					intakeOn = append(intakeOn, rate)
				} else {
					intakeOff = append(intakeOff, rate)
				}
			}
			if doResend {
				seq++
				exp := &countingExporter{}
				var tr *telemetry.Tracing
				if on {
					tr = telemetry.NewWithExporter(exp)
					resendTracerProvider = tr.TracerProvider()
				}
				// Empty tables: only this measurement's failures are due (not the intake
				// phase's, whose topic "orders" this cluster lacks), and a fresh cluster.
				if err := intakeResetTables(ctx, pool); err != nil {
					return err
				}
				cluster, bootstrap, err := startCluster(map[string]int{"bench-resend": *partitions})
				if err != nil {
					return err
				}
				res, err := resendScheduler(ctx, pool, st, bootstrap, "bench-resend", *n, *valueSize, 1000+seq, *resendBatch, *concurrency, false,
					func() (time.Duration, error) { return time.Nanosecond, nil })
				resendTracerProvider = nil
				cluster.Close()
				if err != nil {
					return err
				}
				if err := tr.Shutdown(ctx); err != nil {
					return err
				}
				rate := float64(*n) / res.acked.Seconds()
				fmt.Printf("run %d resend tracing %-3s %8.0f rec/s acked (%8.0f marked)  %6d spans, %d of failed sends\n",
					r, label, rate, float64(*n)/res.marked.Seconds(), exp.spans.Load(), exp.failed.Load())
				if on {
					resendOn = append(resendOn, rate)
				} else {
					resendOff = append(resendOff, rate)
				}
			}
		}
	}
	if doIntake {
		fmt.Printf("intake: median off %.0f rec/s, on %.0f rec/s, ratio on/off %.2f\n",
			resendMedian(intakeOff), resendMedian(intakeOn), resendMedian(intakeOn)/resendMedian(intakeOff))
	}
	if doResend {
		fmt.Printf("resend: median off %.0f rec/s, on %.0f rec/s, ratio on/off %.2f\n",
			resendMedian(resendOff), resendMedian(resendOn), resendMedian(resendOn)/resendMedian(resendOff))
	}
	return nil
}

// tracingIntake runs an intake in this process over a fresh cluster loaded with records, on
// emptied tables, until its group committed every record; it returns records/s and the spans
// exported (on) or 0 (off).
func tracingIntake(ctx context.Context, pool *pgxpool.Pool, st *store.Store, records []intakeBenchRecord, partitions, batch, writers int, on bool) (float64, int64, error) {
	if err := intakeResetTables(ctx, pool); err != nil {
		return 0, 0, err
	}
	const topic, group = "errors", "bench-tracing"
	cluster, bootstrap, err := intakeLoadedCluster(topic, records, partitions)
	if err != nil {
		return 0, 0, err
	}
	defer cluster.Close()
	exp := &countingExporter{}
	var tr *telemetry.Tracing
	var tp trace.TracerProvider
	if on {
		tr = telemetry.NewWithExporter(exp)
		tp = tr.TracerProvider()
	}
	src, err := intake.ParseSource("mpfe:" + topic)
	if err != nil {
		return 0, 0, err
	}
	in, err := intake.New(intake.Config{
		Store: st, NextAttempt: resend.DefaultBackoff().Next, Bootstrap: bootstrap,
		Sources: []intake.Source{src}, DeadLetterTopic: "errors-dlt", GroupID: group, BatchSize: batch, Writers: writers,
		ConsumerConfig: kafka.ConfigMap{"log_level": 3},
		ProducerConfig: kafka.ConfigMap{"log_level": 3},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		TracerProvider: tp,
	})
	if err != nil {
		return 0, 0, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- in.Run(runCtx) }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var committed int64
		if info := cluster.GroupInfo(group); info != nil {
			for _, c := range info.Commits[topic] {
				committed += c.Offset
			}
		}
		if committed >= int64(len(records)) {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			return 0, 0, fmt.Errorf("intake: %d of %d records committed after 5 minutes", committed, len(records))
		}
		time.Sleep(10 * time.Millisecond) // polling the group's commits (each look takes the broker's lock)
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		return 0, 0, err
	}
	if err := tr.Shutdown(ctx); err != nil {
		return 0, 0, err
	}
	return float64(len(records)) / elapsed.Seconds(), exp.spans.Load(), nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
