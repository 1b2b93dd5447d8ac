package intake

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the intake's Prometheus metrics.
type metrics struct {
	ingested      *prometheus.CounterVec
	duplicates    prometheus.Counter
	deadLettered  *prometheus.CounterVec
	batchSize     prometheus.Histogram
	batchDuration prometheus.Histogram
	storeErrors   prometheus.Counter
	deadLetterErr prometheus.Counter
	commitErrors  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_intake_failures_ingested_total",
			Help: "Failures stored by the intake, by temporality, original topic and publisher service.",
		}, []string{"temporality", "topic", "service"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_intake_duplicates_total",
			Help: "Events skipped because a failure with the same idempotenceId was already stored.",
		}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_intake_dead_lettered_total",
			Help: "Records of the error topic published to the dead-letter topic, by the check they failed.",
		}, []string{"check"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_intake_batch_size",
			Help:    "Records per batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9), // 1 .. 65536
		}),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_intake_batch_duration_seconds",
			Help:    "Time from the decoding of a batch to the commit of its offsets, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms .. 262s
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_intake_store_errors_total",
			Help: "Failed attempts to write a batch to Postgres (each is retried).",
		}),
		deadLetterErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_intake_dead_letter_errors_total",
			Help: "Dead-letter events the broker did not acknowledge (each is retried).",
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_intake_commit_errors_total",
			Help: "Failed offset commits; their records are delivered again and skipped as duplicates.",
		}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.ingested, m.duplicates, m.deadLettered, m.batchSize, m.batchDuration,
		m.storeErrors, m.deadLetterErr, m.commitErrors} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register intake metrics: %w", err)
	}
	return m, nil
}
