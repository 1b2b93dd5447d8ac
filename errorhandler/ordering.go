package errorhandler

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// OrderingLimitPolicy says what the ordering guard does when a partition's guard is full
// (Ordering.MaxParked).
type OrderingLimitPolicy int

// The two limit policies. The zero value is OrderingHalt.
const (
	// OrderingHalt halts the partition at the record that would exceed the bound (health
	// reason ReasonOrderingLimit); an operator releases it as any halt.
	OrderingHalt OrderingLimitPolicy = iota
	// OrderingParkAll parks every later record of the partition, whatever its key, without
	// tracking it: the partition keeps moving and nothing more is handed over until the
	// partition's guard is cleared (Runner.ClearOrdering).
	OrderingParkAll
)

// String returns "halt" or "park-all".
func (p OrderingLimitPolicy) String() string {
	switch p {
	case OrderingHalt:
		return "halt"
	case OrderingParkAll:
		return "park-all"
	}
	return fmt.Sprintf("OrderingLimitPolicy(%d)", int(p))
}

// DefaultMaxParked is the default bound of a partition's ordering guard.
const DefaultMaxParked = 10000

// ReasonOrderingLimit is the halt reason of a partition whose ordering guard is full.
const ReasonOrderingLimit = "ordering-limit"

// OutcomeParked: the record was dead-lettered as parked behind an earlier failure of its key.
const OutcomeParked Outcome = "parked"

// Ordering configures the per-key ordering guard (see docs/errorhandler.md): on its topics,
// once a record of a key is dead-lettered on a partition, the later records of that key on the
// partition are dead-lettered as parked behind it (error code avro.CodeParkedBehind) instead of
// being handed to the handler, and handed over in their original order when they come back
// after the first one was resolved. The zero value turns the guard off.
type Ordering struct {
	// Topics are the topics whose keys are guarded; each must be one of Config.Topics.
	// Empty: the guard is off.
	Topics []string
	// Store keeps each partition's parked keys where a restarted or newly assigned consumer
	// finds them: franz.NewOrderingStore or confluent.NewOrderingStore (a compacted Kafka
	// topic). Required when Topics is set.
	Store OrderingStore
	// MaxParked bounds the entries of one partition's guard (a key's head and each parked
	// record count one). Defaults to DefaultMaxParked.
	MaxParked int
	// AtLimit says what happens to the record that would exceed MaxParked. Defaults to
	// OrderingHalt.
	AtLimit OrderingLimitPolicy
}

// Enabled reports whether the guard is on.
func (o Ordering) Enabled() bool { return len(o.Topics) > 0 }

// Guards reports whether topic's keys are guarded.
func (o Ordering) Guards(topic string) bool { return slices.Contains(o.Topics, topic) }

// validate checks o against the rest of the configuration and fills in its defaults.
func (o *Ordering) validate(topics []string, process Policy, errorTopic string) []error {
	if !o.Enabled() {
		return nil
	}
	var errs []error
	for _, t := range o.Topics {
		if !slices.Contains(topics, t) {
			errs = append(errs, fmt.Errorf("Ordering.Topics: %q is not one of Topics", t))
		}
	}
	if o.Store == nil {
		errs = append(errs, errors.New("Ordering.Store is nil: the parked keys must survive restarts"))
	}
	if process != DeadLetter || errorTopic == "" {
		errs = append(errs, errors.New("Ordering needs ProcessPolicy DeadLetter and DeadLetter.ErrorTopic: parked records travel through the error topic"))
	}
	if o.MaxParked < 0 {
		errs = append(errs, errors.New("Ordering.MaxParked must not be negative"))
	}
	if o.AtLimit < OrderingHalt || o.AtLimit > OrderingParkAll {
		errs = append(errs, fmt.Errorf("Ordering.AtLimit: unknown policy %v", o.AtLimit))
	}
	if len(errs) == 0 && o.MaxParked == 0 {
		o.MaxParked = DefaultMaxParked
	}
	return errs
}

// OrderingStore keeps the ordering guard's state of each partition. Implementations must be
// safe for concurrent use; the partitions' workers call them.
type OrderingStore interface {
	// Load returns the stored records of topic's partition: each key's value as Save last
	// wrote it (deleted keys left out).
	Load(ctx context.Context, topic string, partition int32) (map[string][]byte, error)
	// Save writes records, in order, and returns once all are durable (acks=all).
	Save(ctx context.Context, topic string, partition int32, records ...OrderingRecord) error
}

// OrderingRecord is one record of an OrderingStore: a key of a partition's guard and its value
// (nil deletes the key).
type OrderingRecord struct {
	Key   []byte
	Value []byte
}
