package errorhandler

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcome is what became of a record.
type Outcome string

// The outcomes counted by the failures counter. A record handled without error is not a failure.
const (
	// OutcomeHalted: the partition was halted at the record (policy Fail, or the flood guard).
	OutcomeHalted Outcome = "halted"
	// OutcomeSkipped: the record was dropped (policy Skip, a decode hook, or an operator).
	OutcomeSkipped Outcome = "skipped"
	// OutcomeDeadLettered: the record's MPFE was acknowledged by the error topic.
	OutcomeDeadLettered Outcome = "dead_lettered"
	// OutcomeSubstituted: a decode hook replaced the undecodable value.
	OutcomeSubstituted Outcome = "substituted"
	// OutcomeFiltered: the record was a resend meant for another service.
	OutcomeFiltered Outcome = "filtered"
)

// phaseFilter is the phase label of filtered records, which never reach decoding.
const phaseFilter = "filter"

// metrics are the collectors of one registry, shared by every Runner and DeadLetterer that
// registers on it.
type metrics struct {
	failures        *prometheus.CounterVec
	handled         *prometheus.CounterVec
	halted          prometheus.Gauge
	consecutive     *prometheus.GaugeVec
	produced        *prometheus.CounterVec
	produceFailures *prometheus.CounterVec
	inFlight        prometheus.Gauge
	blocked         prometheus.Gauge
}

// newMetrics registers the collectors on reg (a nil reg registers nowhere). A collector that is
// already registered there (by another Runner or DeadLetterer) is shared.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "redrive", Subsystem: "errorhandler", Name: "dead_letter_blocked_partitions",
			Help: "Partitions paused because the error topic cannot be written.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.failures = register(reg, m.failures, &err)
	m.handled = register(reg, m.handled, &err)
	m.halted = register(reg, m.halted, &err)
	m.consecutive = register(reg, m.consecutive, &err)
	m.produced = register(reg, m.produced, &err)
	m.produceFailures = register(reg, m.produceFailures, &err)
	m.inFlight = register(reg, m.inFlight, &err)
	m.blocked = register(reg, m.blocked, &err)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		if *errp == nil {
			*errp = err
		}
	}
	return c
}

func (m *metrics) failure(phase string, outcome Outcome, topic string) {
	m.failures.WithLabelValues(phase, string(outcome), topic).Inc()
}

func partitionLabel(p int32) string { return strconv.FormatInt(int64(p), 10) }
