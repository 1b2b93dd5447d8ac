package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"

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

// record is one record of the error topic and what the intake made of it.
type record struct {
	msg *kafka.Message
	in  store.Incoming
	// cause is the causing message of a valid record (store.CausingMessage).
	cause string
	// check and err say why the record is not a valid MPFE; empty for a valid one.
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

// decode turns a record of the error topic into an Incoming, or marks it bad.
func decode(codec *avro.Codec, msg *kafka.Message) *record {
	r := &record{msg: msg}
	topic := ""
	if msg.TopicPartition.Topic != nil {
		topic = *msg.TopicPartition.Topic
	}
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
	hs, err := e.Payload.FailedMessageMetadata.OriginalHeaders()
	if err != nil {
		r.reject(checkHeaders, err)
		return r
	}
	r.in = store.Incoming{Event: e, Headers: hs}
	if err := store.ValidateIncoming(r.in); err != nil {
		r.reject(checkData, err)
		return r
	}
	r.cause = store.CausingMessage(e, hs)
	return r
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
			*r = *decode(in.cfg.Codec, r.msg)
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
