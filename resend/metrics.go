package resend

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/promreg"
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
	set := promreg.New(reg)
	m.resends = promreg.Register(set, m.resends)
	m.acked = promreg.Register(set, m.acked)
	m.lag = promreg.Register(set, m.lag)
	m.claim = promreg.Register(set, m.claim)
	m.load = promreg.Register(set, m.load)
	m.send = promreg.Register(set, m.send)
	m.mark = promreg.Register(set, m.mark)
	m.deleted = promreg.Register(set, m.deleted)
	m.deletedGroups = promreg.Register(set, m.deletedGroups)
	return m, set.Err()
}
