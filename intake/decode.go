package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/rest"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// Checks that a record can fail besides those of avro.Check.
const (
	// checkHeaders: the failedMessageMetadata entry that holds the exact headers is corrupt.
	checkHeaders = "bad header list"
	// checkData: the event decodes but Postgres cannot store it (store.ValidateIncoming).
	checkData = "invalid data"
	// checkRefused: Postgres refused the event when it was written.
	checkRefused = "refused by the database"
)

// checkSource: a record of a topic that no source reads (cannot happen with a subscription).
const checkSource = "unknown source"

// record is one record of a source topic and what the intake made of it.
type record struct {
	msg *kafka.Message
	// prep is the valid failure, validated once (store.Prepare).
	prep store.Prepared
	// format is the format of the record's source.
	format redrive.SourceFormat
	// check and err say why the record is not valid; empty for a valid one.
	check string
	err   error
	// transient marks a decoding failure that may pass (the schema registry could not be
	// asked): the record is decoded again rather than dead-lettered.
	transient bool
}

func (r *record) bad() bool { return r.err != nil }

func (r *record) reject(check string, err error) {
	r.check, r.err = check, err
}

// decode turns a record of a source topic into a prepared failure, or marks it bad.
func (in *Intake) decode(msg *kafka.Message) *record {
	topic := deref(msg.TopicPartition.Topic)
	src := in.sources[topic]
	if src == nil {
		r := &record{msg: msg, format: redrive.SourceMPFE}
		r.reject(checkSource, fmt.Errorf("topic %q is not a configured source", topic))
		return r
	}
	return decodeSource(src, in.cfg.Codec, msg, in.cfg.Now())
}

// decodeSource decodes msg, a record of src's topic.
func decodeSource(src *Source, codec *avro.Codec, msg *kafka.Message, now time.Time) *record {
	if src.Format == store.SourceMPFE {
		return decodeMPFE(codec, msg, src.cluster)
	}
	r := &record{msg: msg, format: src.Format}
	inc, err := src.foreignIncoming(dltRecordOf(msg), now)
	if err != nil {
		r.reject("bad "+string(src.Format)+" header", err)
		return r
	}
	p, err := store.Prepare(inc)
	if err != nil {
		r.reject(checkData, err)
		return r
	}
	r.prep = p
	return r
}

// dltRecordOf returns the parts of msg that a foreign source reads.
func dltRecordOf(msg *kafka.Message) *dltRecord {
	r := &dltRecord{
		Topic:     deref(msg.TopicPartition.Topic),
		Partition: msg.TopicPartition.Partition,
		Offset:    int64(msg.TopicPartition.Offset),
		Key:       msg.Key,
		Value:     msg.Value,
		Headers:   make([]avro.Header, len(msg.Headers)),
	}
	for i, h := range msg.Headers {
		r.Headers[i] = avro.Header{Name: h.Key, Value: h.Value}
	}
	if msg.TimestampType != kafka.TimestampNotAvailable {
		r.Timestamp = msg.Timestamp
	}
	return r
}

// decodeMPFE turns a record of an error topic into a prepared failure, or marks it bad.
func decodeMPFE(codec *avro.Codec, msg *kafka.Message, cluster string) *record {
	r := &record{msg: msg, format: store.SourceMPFE}
	topic := deref(msg.TopicPartition.Topic)
	e, err := codec.DecodeEvent(topic, msg.Value)
	if err != nil {
		check := "decode"
		var de *avro.DecodeError
		if errors.As(err, &de) {
			check = string(de.Check)
		}
		r.reject(check, err)
		r.transient = transientDecode(err)
		return r
	}
	md := e.Payload.FailedMessageMetadata
	hs, err := md.OriginalHeaders()
	if err != nil {
		r.reject(checkHeaders, err)
		return r
	}
	valueNull := false
	if md != nil {
		v, ok := md.Headers[avro.ValueNullEntry]
		valueNull = ok && string(v) == "true"
		if _, exact := md.Headers[avro.HeadersEntry]; !exact {
			hs = withoutReservedEntries(hs)
		}
	}
	p, err := store.Prepare(store.Incoming{
		Event: e, Headers: hs, ValueNull: valueNull,
		Source: store.Source{Format: store.SourceMPFE, Topic: topic, Partition: msg.TopicPartition.Partition, Offset: int64(msg.TopicPartition.Offset),
			Cluster: cluster},
	})
	if err != nil {
		r.reject(checkData, err)
		return r
	}
	r.prep = p
	return r
}

// withoutReservedEntries drops the metadata entries that the contract reserves for redrive
// (avro.ValueNullEntry, avro.InPlaceAttemptsEntry) from headers read from the plain map: they
// describe the failure, they are not headers of the record.
func withoutReservedEntries(hs []avro.Header) []avro.Header {
	out := hs[:0:0]
	for _, h := range hs {
		if h.Name == avro.ValueNullEntry || h.Name == avro.InPlaceAttemptsEntry {
			continue
		}
		out = append(out, h)
	}
	return out
}

// transientDecode reports whether a decoding failure may pass by itself: the schema registry
// did not answer, or answered with a server error. A registry that says the schema id is
// unknown (4xx), or a schema that does not compile, is a bad record.
func transientDecode(err error) bool {
	var de *avro.DecodeError
	if !errors.As(err, &de) || de.Check != avro.CheckSchemaID {
		return false
	}
	var re *rest.Error
	if errors.As(err, &re) {
		code := re.Code
		for code >= 1000 { // the registry's codes extend HTTP's: 40403, 50001, ...
			code /= 10
		}
		return code >= 500 || code == 408 || code == 429
	}
	// A request that got no answer: the HTTP client's *url.Error around a network error.
	var ue *url.Error
	if !errors.As(err, &ue) {
		return false
	}
	var ne net.Error
	return ue.Timeout() || errors.As(ue.Err, &ne) || errors.Is(ue.Err, io.EOF) || errors.Is(ue.Err, io.ErrUnexpectedEOF)
}

// redecode decodes again, with backoff, the records whose decoding failed transiently, until
// each decodes or fails for good, or ctx ends. Meanwhile the intake is not ready.
func (in *Intake) redecode(ctx context.Context, recs []*record) error {
	backoff := in.newBackoff()
	for {
		var failing []*record
		for _, r := range recs {
			if !r.transient {
				continue
			}
			*r = *in.decode(r.msg)
			if r.transient {
				failing = append(failing, r)
			}
		}
		if len(failing) == 0 {
			in.decodeErr.Store(nil)
			return nil
		}
		err := fmt.Errorf("%d records cannot be decoded for now: %w", len(failing), failing[0].err)
		in.decodeErr.Store(&err)
		in.log.Error("schema registry unavailable; retrying, offsets not committed", "error", err)
		if err := backoff.wait(ctx); err != nil {
			return err
		}
		recs = failing
	}
}
