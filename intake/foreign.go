package intake

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// ErrBadHeader means a record of a foreign dead-letter topic lacks a header its format needs,
// or has one that does not parse; a *HeaderError wraps it.
var ErrBadHeader = errors.New("bad dead-letter header")

// HeaderError names the header of a foreign dead-letter record that is missing or malformed.
// It wraps ErrBadHeader.
type HeaderError struct {
	// Format is the source's format.
	Format redrive.SourceFormat
	// Header is the header's name.
	Header string
	// Reason says what is wrong with it.
	Reason string
}

// Error names the format, the header and the problem.
func (e *HeaderError) Error() string {
	return fmt.Sprintf("%s record: header %s: %s", e.Format, e.Header, e.Reason)
}

// Unwrap returns ErrBadHeader.
func (e *HeaderError) Unwrap() error { return ErrBadHeader }

// foreignNamespace derives the identity of a failure read from a foreign dead-letter topic from
// the record's position there, so that reading it twice (a restart, a rebalance) is one row.
var foreignNamespace = uuid.MustParse("5b1f0c7e-2d4a-4c8e-9f3b-7a6e1d2c9b10")

// foreignIdentity returns the idempotenceId of the failure read from format's topic at
// partition and offset.
func foreignIdentity(format redrive.SourceFormat, topic string, partition int32, offset int64) string {
	name := string(format) + "\x00" + topic + "\x00" + strconv.FormatInt(int64(partition), 10) + "\x00" + strconv.FormatInt(offset, 10)
	return uuid.NewSHA1(foreignNamespace, []byte(name)).String()
}

// dltRecord is a record read from a source topic.
type dltRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte // nil: a null key
	Value     []byte // nil: a null value (a tombstone)
	Headers   []avro.Header
	Timestamp time.Time // zero when the record has none
}

// failureInfo is what a foreign dead-letter record says about its failure.
type failureInfo struct {
	// topic, partition and offset locate the original record; topic "" means unknown, and
	// partition and offset are redrive.UnknownPosition when the record does not tell.
	topic     string
	partition int32
	offset    int64
	// exception is the exception's fully qualified class name, "" when unknown.
	exception  string
	message    string
	stackTrace string
	// publisher is the service that failed, when the record says (consumer group, connector).
	publisher string
	// details are lines for the error description.
	details []string
}

// headers gives the values of a record's headers by name, in order.
type headers struct {
	format redrive.SourceFormat
	byName map[string][][]byte
}

func newHeaders(format redrive.SourceFormat, hs []avro.Header) headers {
	h := headers{format: format, byName: make(map[string][][]byte)}
	for _, x := range hs {
		h.byName[x.Name] = append(h.byName[x.Name], x.Value)
	}
	return h
}

func (h headers) bad(name, format string, args ...any) error {
	return &HeaderError{Format: h.format, Header: name, Reason: fmt.Sprintf(format, args...)}
}

// all returns every value of the header, in order.
func (h headers) all(name string) [][]byte { return h.byName[name] }

// last returns the last value of the header, and whether it is present.
func (h headers) last(name string) ([]byte, bool) {
	vs := h.byName[name]
	if len(vs) == 0 {
		return nil, false
	}
	return vs[len(vs)-1], true
}

// text checks that v is storable text: UTF-8 without NUL.
func (h headers) text(name string, v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", h.bad(name, "not valid UTF-8")
	}
	s := string(v)
	if strings.IndexByte(s, 0) >= 0 {
		return "", h.bad(name, "contains a NUL character")
	}
	return s, nil
}

// optText returns the last value of an optional text header; "" when absent or null.
func (h headers) optText(name string) (string, error) {
	v, ok := h.last(name)
	if !ok || v == nil {
		return "", nil
	}
	return h.text(name, v)
}

// topic returns the last value of a header naming a topic; ok is false when it is absent.
func (h headers) topic(name string) (string, bool, error) {
	v, ok := h.last(name)
	if !ok {
		return "", false, nil
	}
	if v == nil {
		return "", false, h.bad(name, "null value")
	}
	s, err := h.text(name, v)
	if err != nil {
		return "", false, err
	}
	if msg := checkTopicName(s); msg != "" {
		return "", false, h.bad(name, "original topic %s", msg)
	}
	return s, true, nil
}

// bigEndian returns the last value of a required header holding a big-endian integer of size
// bytes (4 or 8), checked to be at least 0.
func (h headers) bigEndian(name string, size int) (int64, error) {
	v, ok := h.last(name)
	if !ok {
		return 0, h.bad(name, "missing")
	}
	if len(v) != size {
		return 0, h.bad(name, "%d bytes, want a %d-byte big-endian integer", len(v), size)
	}
	var n int64
	if size == 4 {
		n = int64(int32(binary.BigEndian.Uint32(v)))
	} else {
		n = int64(binary.BigEndian.Uint64(v))
	}
	if n < 0 {
		return 0, h.bad(name, "%d is negative", n)
	}
	return n, nil
}

// decimal returns the last value of a required header holding a decimal integer of bits bits,
// checked to be at least 0.
func (h headers) decimal(name string, bits int) (int64, error) {
	v, ok := h.last(name)
	if !ok {
		return 0, h.bad(name, "missing")
	}
	if v == nil {
		return 0, h.bad(name, "null value")
	}
	n, err := strconv.ParseInt(string(v), 10, bits)
	if err != nil || n < 0 {
		return 0, h.bad(name, "%q is not a decimal number from 0 to %d", truncateText(v), int64(1)<<(bits-1)-1)
	}
	return n, nil
}

// truncateText shortens header bytes quoted in an error.
func truncateText(v []byte) string {
	if len(v) > 40 {
		v = v[:40]
	}
	return safeText(v)
}

// safeText returns v as storable text: invalid UTF-8 and NUL characters replaced by U+FFFD.
func safeText(v []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(v), "\uFFFD"), "\x00", "\uFFFD")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// simpleClassName returns the simple name of a Java class name: "java.lang.IllegalStateException"
// gives "IllegalStateException", "a.Outer$Inner" gives "Inner".
func simpleClassName(fqcn string) string {
	s := fqcn[strings.LastIndexAny(fqcn, ".$")+1:]
	return strings.TrimSpace(s)
}

// parseForeign reads what a foreign dead-letter record of the source's format says.
func (s *Source) parseForeign(r *dltRecord) (failureInfo, error) {
	var fi failureInfo
	var err error
	switch s.Format {
	case redrive.SourceSpring:
		fi, err = parseSpring(r.Headers)
	case redrive.SourceConnect:
		fi, err = parseConnect(r.Headers)
	case redrive.SourceStreams:
		fi, err = parseStreams(r.Headers)
	case redrive.SourceRaw:
		fi = failureInfo{partition: redrive.UnknownPosition, offset: redrive.UnknownPosition}
	default:
		return fi, fmt.Errorf("source format %q is not a foreign dead-letter format", s.Format)
	}
	if err != nil {
		return fi, err
	}
	if fi.topic == "" {
		if s.OriginalTopic == "" {
			return fi, &HeaderError{Format: s.Format, Header: originHeader(s.Format),
				Reason: fmt.Sprintf("missing, and the source configures no original topic (%s:%s=ORIGINAL_TOPIC): the original topic is unknown", s.Format, s.Topic)}
		}
		fi.topic = s.OriginalTopic
		fi.details = append(fi.details, "original topic from the configuration; partition and offset unknown")
	}
	return fi, nil
}

// originHeader names the header that holds the original topic in format.
func originHeader(format redrive.SourceFormat) string {
	switch format {
	case redrive.SourceSpring:
		return springTopic
	case redrive.SourceConnect:
		return connectTopic + " (context headers: errors.deadletterqueue.context.headers.enable=true)"
	case redrive.SourceStreams:
		return streamsTopic
	}
	return "(none: raw records carry no origin)"
}

// maxCreated is the last time a failure's creation may have: Postgres and the clients agree up
// to year 9999.
var maxCreated = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// foreignIncoming maps a foreign dead-letter record to a failure like an MPFE one: the original
// topic, partition and offset where known; the error code from the exception's simple class
// name (or the configured one); the message, stack trace and a normalised stack-trace hash;
// the publisher from the record (or the configured one, else the source topic); the
// configured temporality. Its identity derives from the record's position on the source topic.
func (s *Source) foreignIncoming(r *dltRecord, now time.Time) (store.Incoming, error) {
	fi, err := s.parseForeign(r)
	if err != nil {
		return store.Incoming{}, err
	}
	code := s.ErrorCode
	if code == "" && fi.exception != "" {
		code = simpleClassName(fi.exception)
	}
	if code == "" {
		code = avro.CodeUnknownException
	}
	msg := fi.message
	if msg == "" {
		msg = fi.exception
	}
	if msg == "" {
		msg = fmt.Sprintf("record dead-lettered to %s without error information", r.Topic)
	}
	publisher := s.PublisherService
	if publisher == "" {
		publisher = fi.publisher
	}
	if publisher == "" {
		publisher = r.Topic
	}
	details := append([]string{fmt.Sprintf("read from the %s dead-letter topic %s, partition %d, offset %d", s.Format, r.Topic, r.Partition, r.Offset)}, fi.details...)
	if fi.exception != "" && code != simpleClassName(fi.exception) {
		details = append(details, "exception "+fi.exception)
	}
	if s.Format == redrive.SourceStreams {
		details = append(details, "Kafka Streams does not keep the original headers: a resend has none of them")
	}
	desc := strings.Join(details, "; ")
	var trace, hash *string
	if fi.stackTrace != "" {
		trace, hash = &fi.stackTrace, s.hashes.hash(fi.stackTrace)
	}
	created := r.Timestamp
	if created.IsZero() || created.Before(time.UnixMilli(1)) || created.After(maxCreated) {
		created = now // none, or none that Postgres keeps
	}
	id := foreignIdentity(s.Format, r.Topic, r.Partition, r.Offset)
	e := &avro.Event{
		Identity:  avro.Identity{EventID: id, IdempotenceID: id, Created: created.UTC().Truncate(time.Millisecond)},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: s.system(), Service: publisher},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: fi.topic, Partition: fi.partition, Offset: fi.offset},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: s.temporality(), Code: code},
		},
		Payload: avro.Payload{
			OriginalMessage:  r.Value,
			OriginalKey:      r.Key,
			ErrorMessage:     msg,
			ErrorDescription: &desc,
			StackTrace:       trace,
			StackTraceHash:   hash,
		},
		DomainEventVersion: avro.DomainEventVersion,
	}
	return store.Incoming{
		Event:     e,
		Headers:   r.Headers,
		ValueNull: r.Value == nil,
		Source:    store.Source{Format: s.Format, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Cluster: s.cluster},
	}, nil
}
