package errorhandler

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/redrive/redrive/avro"
)

// MessageInfo is what an Extractor knows about a failed message itself. Empty fields are left
// out of the MPFE's failedMessageMetadata.
type MessageInfo struct {
	// ID is the message's own id. It becomes failedMessageMetadata.eventId and the MPFE's Kafka
	// key, so that all failures of one message stay in order on one partition.
	ID string
	// IdempotenceID is the message's own idempotence id.
	IdempotenceID string
	// Type and Version name the message's type.
	Type    string
	Version string
	// System and Service name the message's publisher.
	System  string
	Service string
	// Created is when the message was created.
	Created time.Time
}

// Extractor reads what it can about a failed message, e.g. from its headers. It must not
// modify msg.
type Extractor func(msg *kafka.Message) MessageInfo

// HeaderNames names the headers a HeaderExtractor reads; an empty name is not read.
type HeaderNames struct {
	ID            string
	IdempotenceID string
	Type          string
	Version       string
	System        string
	Service       string
}

// HeaderExtractor returns an Extractor that reads the message's id, type and version from the
// named headers (the last header of a name wins).
func HeaderExtractor(names HeaderNames) Extractor {
	return func(msg *kafka.Message) MessageInfo {
		var info MessageInfo
		for _, h := range msg.Headers {
			v := string(h.Value)
			switch h.Key {
			case "":
			case names.ID:
				info.ID = v
			case names.IdempotenceID:
				info.IdempotenceID = v
			case names.Type:
				info.Type = v
			case names.Version:
				info.Version = v
			case names.System:
				info.System = v
			case names.Service:
				info.Service = v
			}
		}
		return info
	}
}

// failure is one failed record's error, phase and classification.
type failure struct {
	phase Phase
	err   error
	class Classification
}

// buildEvent returns the MPFE of msg's failure and the string of its Kafka key record.
func buildEvent(msg *kafka.Message, f failure, system, service string, ids [2]string, now time.Time, info MessageInfo) (*avro.Event, string) {
	ev, meta := &avro.Event{}, &avro.Metadata{}
	key := fillEvent(ev, meta, msg, f, system, service, ids, now, info)
	return ev, key
}

// fillEvent writes the MPFE of msg's failure to ev, with meta as its failed message's metadata,
// and returns the string of its Kafka key record.
func fillEvent(ev *avro.Event, meta *avro.Metadata, msg *kafka.Message, f failure, system, service string, ids [2]string, now time.Time, info MessageInfo) string {
	topic := ""
	if msg.TopicPartition.Topic != nil {
		topic = *msg.TopicPartition.Topic
	}
	trace := avro.Ptr(cutStackTrace(stackTrace(f.err)))
	hash := stackTraceHashPtr(f)
	desc := description(f)
	// The header map is written straight from msg.Headers by appendEvent (see appendHeaders);
	// eventWithHeaders fills it for readers of the Go value.
	*meta = avro.Metadata{}
	setOpt(&meta.EventID, info.ID)
	setOpt(&meta.IdempotenceID, info.IdempotenceID)
	setOpt(&meta.System, info.System)
	setOpt(&meta.Service, info.Service)
	setOpt(&meta.MessageTypeName, info.Type)
	setOpt(&meta.MessageTypeVersion, info.Version)
	if !info.Created.IsZero() {
		meta.Created = avro.Ptr(info.Created.UTC().Truncate(time.Millisecond))
	}
	*ev = avro.Event{
		Identity: avro.Identity{EventID: ids[0], IdempotenceID: ids[1], Created: now.UTC().Truncate(time.Millisecond)},
		Type:     avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{
			System:  system,
			Service: service,
		},
		References: avro.References{
			Message: avro.MessageReference{Type: avro.MessageReferenceType, TopicName: topic,
				Partition: msg.TopicPartition.Partition, Offset: int64(msg.TopicPartition.Offset)},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: f.class.Temporality, Code: f.class.Code},
		},
		Payload: avro.Payload{
			OriginalMessage:       msg.Value,
			OriginalKey:           msg.Key,
			ErrorMessage:          errorMessage(f.err),
			ErrorDescription:      desc,
			StackTrace:            trace,
			StackTraceHash:        hash,
			FailedMessageMetadata: meta,
		},
		DomainEventVersion: avro.DomainEventVersion,
	}
	if ev.Payload.OriginalMessage == nil {
		// The contract's originalMessage is not nullable: a tombstone travels as empty bytes.
		ev.Payload.OriginalMessage = []byte{}
	}
	key := info.ID
	if key == "" {
		key = ids[1]
	}
	return key
}

func setOpt(dst **string, v string) {
	if v != "" {
		*dst = &v
	}
}

func errorMessage(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// description returns the MPFE's errorDescription. The texts are few and shared between events.
func description(f failure) *string {
	var pe *PanicError
	var de *DecodeError
	var what string
	switch {
	case errors.As(f.err, &de):
		what = "the record's " + string(de.Part) + " could not be decoded"
	case errors.As(f.err, &pe):
		what = "the handler panicked"
	case f.phase == PhaseDecode:
		what = "the record could not be decoded"
	default:
		what = "the handler returned an error"
	}
	return sharedText(string(f.phase), " phase: ", what)
}

// eventWithHeaders returns ev with its metadata header map filled from hs, as it is written.
func eventWithHeaders(ev *avro.Event, hs []kafka.Header) *avro.Event {
	out := *ev
	meta := *ev.Payload.FailedMessageMetadata
	meta.Headers = headerMap(hs)
	out.Payload.FailedMessageMetadata = &meta
	return &out
}

// headerMap returns the metadata header map the way avro.Metadata.SetHeaders writes it: every
// header by name (the last value wins, null as empty bytes) plus the ordered list entry.
func headerMap(hs []kafka.Header) map[string][]byte {
	m := make(map[string][]byte, len(hs)+1)
	for _, h := range hs {
		if h.Value == nil {
			m[h.Key] = []byte{}
		} else {
			m[h.Key] = h.Value
		}
	}
	list := make([]avro.Header, len(hs))
	for i, h := range hs {
		list[i] = avro.Header{Name: h.Key, Value: h.Value}
	}
	m[avro.HeadersEntry], _ = avro.EncodeHeaderList(list)
	return m
}

// maxChainDepth bounds how deep error chains are walked.
const maxChainDepth = 32

// stackTrace describes err for the MPFE's stackTrace field: each error of the chain with its
// type, and the goroutine stack of a panic.
func stackTrace(err error) string {
	if err == nil {
		return ""
	}
	var b strings.Builder
	var panics []*PanicError
	writeChain(&b, err, "", 0, &panics)
	for _, pe := range panics {
		b.WriteString("\n")
		b.Write(pe.Stack)
	}
	return b.String()
}

func writeChain(b *strings.Builder, err error, prefix string, depth int, panics *[]*PanicError) {
	for ; err != nil && depth < maxChainDepth; depth++ {
		b.WriteString(prefix)
		b.WriteString(typeName(err))
		b.WriteString(": ")
		b.WriteString(oneLine(err.Error()))
		b.WriteByte('\n')
		if pe, ok := err.(*PanicError); ok {
			*panics = append(*panics, pe)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for i, e := range u.Unwrap() {
				writeChain(b, e, fmt.Sprintf("%s  [%d] ", indent(prefix), i), depth+1, panics)
			}
			return
		case interface{ Unwrap() error }:
			err = u.Unwrap()
			prefix = indent(prefix) + "caused by "
		default:
			return
		}
	}
}

func indent(prefix string) string {
	return strings.Repeat(" ", len(prefix)-len(strings.TrimLeft(prefix, " ")))
}

func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}

func typeName(err error) string { return reflect.TypeOf(err).String() }

// cutStackTrace cuts s at avro.MaxStackTrace bytes (on a character boundary) plus "...".
func cutStackTrace(s string) string {
	if len(s) <= avro.MaxStackTrace {
		return s
	}
	n := avro.MaxStackTrace
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// stackTraceHash returns a hash that is the same for failures of the same kind: the phase,
// the code and the error types of the chain (with a decode error's part and a panic's site),
// never the message text, which carries ids and values.
func stackTraceHash(f failure) string { return *stackTraceHashPtr(f) }

// stackTraceHashPtr is stackTraceHash; the result is shared between events of the same kind.
func stackTraceHashPtr(f failure) *string {
	var buf [256]byte
	kind := appendKind(buf[:0], f)
	hashCache.RLock()
	h, ok := hashCache.m[string(kind)]
	hashCache.RUnlock()
	if ok {
		return h
	}
	sum := sha256.Sum256(kind)
	h = avro.Ptr(hex.EncodeToString(sum[:]))
	hashCache.Lock()
	if len(hashCache.m) < maxHashCache {
		hashCache.m[string(kind)] = h
	}
	hashCache.Unlock()
	return h
}

// appendKind appends the kind of f: its phase, code and the kind of its error chain.
func appendKind(b []byte, f failure) []byte {
	b = append(b, f.phase...)
	b = append(b, '|')
	b = append(b, f.class.Code...)
	b = append(b, '|')
	return kindOf(b, f.err, 0)
}

// hashCache maps failure kinds to their hashes; kinds are few (types × codes × sites).
var hashCache = struct {
	sync.RWMutex
	m map[string]*string
}{m: map[string]*string{}}

const maxHashCache = 4096

// sharedText returns the concatenation of parts, shared with every earlier call with the same
// parts (at most maxHashCache texts are kept).
func sharedText(parts ...string) *string {
	var buf [128]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(b, p...)
	}
	textCache.RLock()
	t, ok := textCache.m[string(b)]
	textCache.RUnlock()
	if ok {
		return t
	}
	t = avro.Ptr(string(b))
	textCache.Lock()
	if len(textCache.m) < maxHashCache {
		textCache.m[*t] = t
	}
	textCache.Unlock()
	return t
}

var textCache = struct {
	sync.RWMutex
	m map[string]*string
}{m: map[string]*string{}}

// kindOf appends the kind of err's chain: the types, a decode error's part, a panic's site.
func kindOf(b []byte, err error, depth int) []byte {
	for ; err != nil && depth < maxChainDepth; depth++ {
		b = append(b, typeName(err)...)
		b = append(b, ';')
		switch e := err.(type) {
		case *DecodeError:
			b = append(b, "part="...)
			b = append(b, e.Part...)
			b = append(b, ';')
		case *PanicError:
			b = append(b, "site="...)
			b = append(b, e.Site...)
			b = append(b, ";value="...)
			b = append(b, reflect.TypeOf(e.Value).String()...)
			b = append(b, ';')
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			b = append(b, '(')
			for _, e := range u.Unwrap() {
				b = kindOf(b, e, depth+1)
				b = append(b, ',')
			}
			return append(b, ')')
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return b
		}
	}
	return b
}
