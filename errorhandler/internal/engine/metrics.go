package engine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/errorhandler"

	"github.com/redrive/redrive/internal/promreg"
)

// phaseFilter is the phase label of filtered records, which never reach decoding.
const phaseFilter = "filter"

// Outcome is errorhandler.Outcome.
type Outcome = errorhandler.Outcome

// Metrics are the collectors of one registry, shared by every Runner and DeadLetterer that
// registers on it.
type Metrics struct {
	failures        *prometheus.CounterVec
	handled         *prometheus.CounterVec
	halted          prometheus.Gauge
	consecutive     *prometheus.GaugeVec
	produced        *prometheus.CounterVec
	produceFailures *prometheus.CounterVec
	inFlight        prometheus.Gauge
	inPlaceRetries  *prometheus.CounterVec
	blocked         prometheus.Gauge
}

// NewMetrics registers the collectors on reg (a nil reg registers nowhere). A collector that is
// already registered there (by another Runner or DeadLetterer) is shared.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "failures_total",
			Help: "Records that failed or were filtered, by phase (decode, process, filter), outcome (halted, skipped, dead_lettered, substituted, filtered) and topic.",
		}, []string{"phase", "outcome", "topic"}),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "records_handled_total",
			Help: "Records the handler processed without error, by topic.",
		}, []string{"topic"}),
		halted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "halted_partitions",
			Help: "Partitions halted at a failed record, waiting for an operator.",
		}),
		consecutive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "consecutive_failures",
			Help: "Failures in a row on a partition; the flood guard halts the partition above its threshold.",
		}, []string{"topic", "partition"}),
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "dead_letter_produced_total",
			Help: "MessageProcessingFailedEvents acknowledged by the error topic, by error topic.",
		}, []string{"error_topic"}),
		produceFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "dead_letter_produce_failures_total",
			Help: "Failed attempts to produce a MessageProcessingFailedEvent (each is retried), by error topic.",
		}, []string{"error_topic"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "dead_letter_in_flight",
			Help: "MessageProcessingFailedEvents produced or being retried, not yet acknowledged.",
		}),
		inPlaceRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "inplace_retries_total",
			Help: "In-place retries of a failing handler (calls after the first), by topic.",
		}, []string{"topic"}),
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "dead_letter_blocked_partitions",
			Help: "Partitions paused because the error topic cannot be written.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	set := promreg.New(reg)
	m.failures = promreg.Register(set, m.failures)
	m.handled = promreg.Register(set, m.handled)
	m.halted = promreg.Register(set, m.halted)
	m.consecutive = promreg.Register(set, m.consecutive)
	m.produced = promreg.Register(set, m.produced)
	m.produceFailures = promreg.Register(set, m.produceFailures)
	m.inFlight = promreg.Register(set, m.inFlight)
	m.blocked = promreg.Register(set, m.blocked)
	m.inPlaceRetries = promreg.Register(set, m.inPlaceRetries)
	if err := set.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) failure(phase string, outcome Outcome, topic string) {
	m.failures.WithLabelValues(phase, string(outcome), topic).Inc()
}

func partitionLabel(p int32) string { return strconv.FormatInt(int64(p), 10) }
