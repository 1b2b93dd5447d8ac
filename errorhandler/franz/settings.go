package franz

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Settings are the franz-go (kgo) settings of a Runner or a DeadLetterer.
type Settings struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// GroupInstanceID, when set, makes the consumer a static member of its group (KIP-345,
	// kgo.InstanceID): it sends no LeaveGroup when it closes, and a restart with the same id
	// within the session timeout gets its partitions back at once, without a rebalance, where
	// a dynamic member's partitions stall until the session timeout removes the dead member
	// (45s by default). Each member of the group needs its own id that stays the same across
	// its restarts, e.g. a StatefulSet pod's name (see docs/errorhandler.md). Empty: dynamic
	// membership.
	GroupInstanceID string
	// ConsumerOpts are extra options of the consumer client, e.g. kgo.SessionTimeout, kgo.FetchMaxWait (default here 200ms, so that a resumed
	// partition is fetched soon) or TLS and SASL options. The runner's
	// own options come after them and win: seed brokers, group, topics, reset to the start,
	// no autocommit, BlockRebalanceOnPoll and the partition callbacks.
	ConsumerOpts []kgo.Opt
	// DeadLetterBrokers are the seed brokers of the cluster holding the error topic. Defaults
	// to Brokers.
	DeadLetterBrokers []string
	// ProducerOpts are extra options of the MPFE producer client. They override the defaults
	// (linger 20ms, snappy compression — kgo's own default, which costs less CPU than lz4 in Go —
	// and a record delivery timeout of 30s) but not acks=all and idempotence: an
	// option that weakens them is refused by New. kgo's ProducerBatchMaxBytes (default about
	// 1 MB) is also the largest MPFE it sends: raise it, with the error topic's
	// max.message.bytes, for larger originals (an MPFE that is too large is retried, its
	// partition waiting, never dropped).
	ProducerOpts []kgo.Opt
}

func (s *Settings) validate(consumer bool) error {
	if len(s.Brokers) == 0 && (consumer || len(s.DeadLetterBrokers) == 0) {
		return errors.New("invalid settings: Brokers is empty")
	}
	if s.GroupInstanceID != strings.TrimSpace(s.GroupInstanceID) {
		return fmt.Errorf("invalid settings: GroupInstanceID %q has leading or trailing spaces", s.GroupInstanceID)
	}
	if len(s.DeadLetterBrokers) == 0 {
		s.DeadLetterBrokers = s.Brokers
	}
	return nil
}

// producerOpts returns the MPFE producer's options.
func (s *Settings) producerOpts(log *slog.Logger) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.DeadLetterBrokers...),
		kgo.ClientID("redrive-errorhandler"),
		kgo.ProducerLinger(20 * time.Millisecond),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.WithLogger(newLogger(log)),
	}
	opts = append(opts, s.ProducerOpts...)
	return append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
}

// checkProducer refuses a producer client whose options weakened acks=all or idempotence.
func checkProducer(cl *kgo.Client) error {
	if v, ok := cl.OptValue(kgo.DisableIdempotentWrite).(bool); ok && v {
		return fmt.Errorf("invalid settings: ProducerOpts: MPFEs need an idempotent producer (kgo.DisableIdempotentWrite)")
	}
	return nil
}

// kgoLogger forwards franz-go's warnings and errors to a slog.Logger.
type kgoLogger struct{ log *slog.Logger }

func newLogger(log *slog.Logger) kgo.Logger { return kgoLogger{log: log} }

func (l kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		l.log.Error("kgo: "+msg, keyvals...)
	case kgo.LogLevelWarn:
		l.log.Warn("kgo: "+msg, keyvals...)
	default:
		l.log.Debug("kgo: "+msg, keyvals...)
	}
}
