package resend

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Triggers of a resend, the "trigger" label of redrive_resend_total.
const (
	TriggerAuto   = "auto"
	TriggerManual = "manual"
)

// metrics are the scheduler's Prometheus metrics.
type metrics struct {
	// resends counts resends by trigger (auto, manual) and outcome (resent, failed,
	// exhausted, not_found, conflict).
	resends *prometheus.CounterVec
	// acked counts records the broker acknowledged, by trigger, before their failures are
	// marked RESENT.
	acked *prometheus.CounterVec
	// lag is now − the oldest due next_attempt_at, 0 when nothing is due.
	lag prometheus.Gauge
	// claim observes the duration of claim transactions.
	claim prometheus.Histogram
	// load observes the duration of loading the records of a claimed batch.
	load prometheus.Histogram
	// send observes the time from the first produce of a batch to its last acknowledgement.
	send prometheus.Histogram
	// mark observes the duration of the statements that record resend outcomes (resend
	// failures of a batch, RESENT marks of up to markMaxBatches batches).
	mark prometheus.Histogram
	// deleted counts failures deleted by housekeeping, by state.
	deleted *prometheus.CounterVec
	// deletedGroups counts groups that housekeeping left empty and deleted.
	deletedGroups prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		resends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_resend_total",
			Help: "Resends of stored failures by trigger (auto, manual) and outcome (resent, failed, exhausted, not_found, conflict).",
		}, []string{"trigger", "outcome"}),
		acked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_resend_acknowledged_total",
			Help: "Resent records acknowledged by the broker, by trigger (auto, manual); a failure is marked RESENT after its record is acknowledged.",
		}, []string{"trigger"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redrive_resend_scheduler_lag_seconds",
			Help: "Now minus the oldest next_attempt_at of the due RETRY_PENDING failures; 0 when none is due.",
		}),
		claim: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_resend_claim_duration_seconds",
			Help:    "Duration of one claim of a batch of due failures (one short transaction that reads the due index and writes one claim row).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
		}),
		load: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_resend_load_duration_seconds",
			Help:    "Duration of loading the stored records of one claimed batch of due failures.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
		}),
		send: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_resend_batch_send_duration_seconds",
			Help:    "Time from the first produce of a resend batch to its last acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		mark: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redrive_resend_mark_duration_seconds",
			Help:    "Duration of one statement recording resend outcomes: resend failures of a batch, or RESENT marks of up to four acknowledged batches.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_housekeeping_deleted_failures_total",
			Help: "Failures deleted by housekeeping, by state.",
		}, []string{"state"}),
		deletedGroups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_housekeeping_deleted_groups_total",
			Help: "Failure groups deleted by housekeeping because they were left empty.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	m.resends = register(reg, m.resends, &errs)
	m.acked = register(reg, m.acked, &errs)
	m.lag = register(reg, m.lag, &errs)
	m.claim = register(reg, m.claim, &errs)
	m.load = register(reg, m.load, &errs)
	m.send = register(reg, m.send, &errs)
	m.mark = register(reg, m.mark, &errs)
	m.deleted = register(reg, m.deleted, &errs)
	m.deletedGroups = register(reg, m.deletedGroups, &errs)
	return m, errors.Join(errs...)
}

// register registers c, or returns the equal collector registered before (several schedulers
// in one process share their metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errs *[]error) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		*errs = append(*errs, err)
	}
	return c
}
