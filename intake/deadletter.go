package intake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
)

// truncatedKeep is how many bytes of the value and of the key a dead-letter event keeps at
// first when the whole record does not fit into one (over the codec's size limit or the
// broker's); it is divided by 4 while the event still does not fit.
const truncatedKeep = 64 << 10

// keepAll marks a dead-letter event that carries the whole record.
const keepAll = -1

// deadLetterNamespace derives the idempotenceId of a dead-letter event from the position of
// the bad record, so that publishing it again (after a crash before the commit) repeats the
// same idempotenceId.
var deadLetterNamespace = uuid.MustParse("9d3c2b8e-5f0a-4f3e-9a51-0d7c6e1b2a40")

// wrap builds the dead-letter event of a bad record: code DESERIALIZATION_FAILED, PERMANENT,
// the raw value, key and headers as the original message, its topic, partition and offset as
// the message reference. With keep >= 0, the value and key are cut to keep bytes and the headers
// left out, and the error description says so.
func (in *Intake) wrap(r *record, keep int) *avro.Event {
	m := r.msg
	topic := ""
	if m.TopicPartition.Topic != nil {
		topic = *m.TopicPartition.Topic
	}
	pos := redrive.TopicPartitionOffset(topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))
	value, key := m.Value, m.Key
	if len(value) == 0 {
		value = []byte(avro.EmptyContent)
	}
	desc := fmt.Sprintf("record %s of the error topic is not a valid MessageProcessingFailedEvent (check: %s)", pos, r.check)
	if r.format != redrive.SourceMPFE && r.format != "" {
		desc = fmt.Sprintf("record %s of the %s dead-letter topic cannot be read as a %s record (check: %s)", pos, r.format, r.format, r.check)
	}
	var headers []avro.Header
	if keep >= 0 {
		sum := sha256.Sum256(value)
		desc += fmt.Sprintf("; the record is too large for the dead-letter topic: originalMessage cut from %d to at most %d bytes "+
			"(SHA-256 of the whole %s), originalKey cut from %d to at most %d bytes, %d headers left out",
			len(value), keep, hex.EncodeToString(sum[:]), len(key), keep, len(m.Headers))
		value = value[:min(len(value), keep)]
		if key != nil {
			key = key[:min(len(key), keep)]
		}
	} else {
		headers = make([]avro.Header, len(m.Headers))
		for i, h := range m.Headers {
			headers[i] = avro.Header{Name: h.Key, Value: h.Value}
		}
	}
	md := &avro.Metadata{Headers: map[string][]byte{}}
	if len(headers) > 0 {
		if err := md.SetHeaders(headers); err != nil {
			md.Headers = map[string][]byte{}
			desc += fmt.Sprintf("; %d headers left out: %v", len(headers), err)
		}
	}
	return avro.NewFailureEvent(&avro.FailedRecord{
		EventID:       uuid.NewString(),
		IdempotenceID: uuid.NewSHA1(deadLetterNamespace, []byte(pos)).String(),
		Created:       in.cfg.Now(),
		System:        in.cfg.PublisherSystem, Service: in.cfg.PublisherService,
		Topic: topic, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset),
		Temporality: avro.Permanent, Code: avro.CodeDeserializationFailed,
		Key: key, Value: value,
		Tombstone:        m.Value == nil, // a tombstone stays one when reactivated
		ErrorMessage:     strings.ToValidUTF8(r.err.Error(), "\uFFFD"),
		ErrorDescription: &desc,
		Metadata:         md,
	})
}

// encodeDeadLetter returns the key and value of the dead-letter record of r, keeping at most keep
// bytes of its value and key (all with keepAll), or less when the event is over the codec's
// size limit; it returns the keep it used.
func (in *Intake) encodeDeadLetter(r *record, keep int) (key, value []byte, used int, err error) {
	e := in.wrap(r, keep)
	value, err = in.cfg.Codec.EncodeEvent(in.cfg.DeadLetterTopic, e)
	if err != nil && errors.Is(err, avro.ErrTooLarge) && keep != 0 {
		return in.encodeDeadLetter(r, smaller(keep))
	}
	if err != nil {
		return nil, nil, keep, fmt.Errorf("encode dead-letter event: %w", err)
	}
	key, err = in.cfg.Codec.EncodeKey(in.cfg.DeadLetterTopic, avro.Key{Key: e.Identity.IdempotenceID})
	if err != nil {
		return nil, nil, keep, fmt.Errorf("encode dead-letter key: %w", err)
	}
	return key, value, keep, nil
}

// smaller returns the next, smaller keep after one that did not fit.
func smaller(keep int) int {
	if keep == keepAll {
		return truncatedKeep
	}
	return keep / 4
}

// deadLetter publishes the dead-letter events of bad and waits until the broker acknowledged
// every one, retrying with backoff. It returns only when all are acknowledged or ctx ends.
func (in *Intake) deadLetter(ctx context.Context, prod *kafka.Producer, bad []*record) error {
	if len(bad) == 0 {
		return nil
	}
	keep := make(map[*record]int) // absent: keepAll
	pending := bad
	backoff := in.newBackoff()
	for len(pending) > 0 {
		reports := make(chan kafka.Event, len(pending))
		var failed []*record
		var errs []error
		sent := 0
		for _, r := range pending {
			k, ok := keep[r]
			if !ok {
				k = keepAll
			}
			key, value, used, err := in.encodeDeadLetter(r, k)
			keep[r] = used
			if err != nil {
				failed, errs = append(failed, r), append(errs, err)
				continue
			}
			topic := in.cfg.DeadLetterTopic
			err = prod.Produce(&kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
				Key:            key,
				Value:          value,
				Opaque:         r,
			}, reports)
			if err != nil {
				if tooLarge(err) {
					keep[r] = smaller(used)
				}
				failed, errs = append(failed, r), append(errs, fmt.Errorf("produce: %w", err))
				continue
			}
			sent++
		}
		for ; sent > 0; sent-- {
			var ev kafka.Event
			select {
			case ev = <-reports:
			case <-ctx.Done(): // the reports channel is buffered: the producer never blocks on it
				return ctx.Err()
			}
			m, ok := ev.(*kafka.Message)
			if !ok {
				continue // only messages are sent to a delivery channel
			}
			r := m.Opaque.(*record)
			if err := m.TopicPartition.Error; err != nil {
				if tooLarge(err) {
					keep[r] = smaller(keep[r])
				}
				failed, errs = append(failed, r), append(errs, fmt.Errorf("delivery: %w", err))
				continue
			}
			in.metrics.deadLettered.WithLabelValues(r.check).Inc()
			in.log.Warn("record dead-lettered",
				"topic", deref(r.msg.TopicPartition.Topic), "partition", r.msg.TopicPartition.Partition,
				"offset", int64(r.msg.TopicPartition.Offset), "check", r.check, "error", r.err,
				"dead_letter_topic", in.cfg.DeadLetterTopic, "truncated", keep[r] != keepAll)
		}
		if len(failed) == 0 {
			in.deadLetterErr.Store(nil)
			return nil
		}
		err := fmt.Errorf("dead-letter topic %s: %d of %d events not acknowledged: %w",
			in.cfg.DeadLetterTopic, len(failed), len(pending), errors.Join(errs...))
		in.deadLetterErr.Store(&err)
		in.metrics.deadLetterErr.Add(float64(len(failed)))
		in.log.Error("dead-letter events not acknowledged; retrying, offsets not committed", "error", err)
		if err := backoff.wait(ctx); err != nil {
			return err
		}
		pending = failed
	}
	return nil
}

func tooLarge(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke) && ke.Code() == kafka.ErrMsgSizeTooLarge
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
