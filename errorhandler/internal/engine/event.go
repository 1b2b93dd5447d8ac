package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/internal/errchain"
)

// Phase is errorhandler.Phase.
type Phase = errorhandler.Phase

// failure is one failed record's error, phase and classification.
type failure struct {
	phase Phase
	err   error
	class errorhandler.Classification
}

// classifyFailure classifies err with cl (see errorhandler.ClassifyWith).
func classifyFailure(cl errorhandler.Classifier, phase Phase, err error) failure {
	return failure{phase: phase, err: err, class: errorhandler.ClassifyWith(cl, phase, err)}
}

// eventParams is what fillEvent needs to write the MPFE of one failure.
type eventParams struct {
	// msg is the failed record.
	msg *errorhandler.Message
	// f is its failure.
	f failure
	// system and service name the publisher.
	system, service string
	// eventID and idempotenceID are the event's identity.
	eventID, idempotenceID string
	// now is the event's creation time.
	now time.Time
	// info is what the Extractor knows about the message.
	info errorhandler.MessageInfo
	// inPlaceAttempts is the number of handler calls made in place; 0 when in-place retries
	// are not configured (the metadata entry is then left out).
	inPlaceAttempts int
	// trace, when not nil, is where the stack trace's text is kept (a field of the job, so
	// that the event's pointer to it costs no allocation); nil: a new variable.
	trace *string
	// traceBuf, when not nil, is a buffer of the job's own that the text is built in (a
	// recycled job's: the text then lives as long as the job's present use, no allocation).
	traceBuf *[]byte
}

// buildEvent returns the MPFE of p's failure and the string of its Kafka key record.
func buildEvent(p *eventParams) (*avro.Event, string) {
	ev, meta := &avro.Event{}, &avro.Metadata{}
	key := fillEvent(ev, meta, p)
	return ev, key
}

// fillEvent writes the MPFE of p's failure to ev, with meta as its failed message's metadata,
// and returns the string of its Kafka key record.
func fillEvent(ev *avro.Event, meta *avro.Metadata, p *eventParams) string {
	msg, f, info := p.msg, p.f, p.info
	trace := p.trace
	if trace == nil {
		trace = new(string)
	}
	if p.traceBuf != nil {
		b := cutStackTraceBytes(appendStackTrace((*p.traceBuf)[:0], f.err))
		*p.traceBuf = b
		*trace = unsafe.String(unsafe.SliceData(b), len(b))
	} else {
		*trace = cutStackTrace(stackTrace(f.err))
	}
	hash := stackTraceHashPtr(f)
	desc := description(f)
	// The header map is written straight from msg.Headers by appendEvent, unless the event
	// carries redrive's own entries (a tombstone marker, the in-place attempts): then the map
	// is built here, once, with those entries added.
	*meta = avro.Metadata{}
	if info != (errorhandler.MessageInfo{}) { // setOpt's copy of each text is on the heap
		setOpt(&meta.EventID, info.ID)
		setOpt(&meta.IdempotenceID, info.IdempotenceID)
		setOpt(&meta.System, info.System)
		setOpt(&meta.Service, info.Service)
		setOpt(&meta.MessageTypeName, info.Type)
		setOpt(&meta.MessageTypeVersion, info.Version)
		if !info.Created.IsZero() {
			meta.Created = avro.Ptr(info.Created.UTC().Truncate(time.Millisecond))
		}
	}
	if msg.Value == nil || p.inPlaceAttempts > 0 {
		meta.Headers = headerMap(msg.Headers)
		if p.inPlaceAttempts > 0 {
			meta.Headers[avro.InPlaceAttemptsEntry] = strconv.AppendInt(nil, int64(p.inPlaceAttempts), 10)
		}
	}
	avro.FillFailureEvent(ev, &avro.FailedRecord{
		EventID: p.eventID, IdempotenceID: p.idempotenceID, Created: p.now,
		System: p.system, Service: p.service,
		Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset,
		Temporality: f.class.Temporality, Code: f.class.Code,
		Key: msg.Key, Value: msg.Value, Tombstone: msg.Value == nil,
		ErrorMessage: errorMessage(f.err), ErrorDescription: desc, StackTrace: trace, StackTraceHash: hash,
		Metadata: meta,
	})
	key := info.ID
	if key == "" {
		key = p.idempotenceID
	}
	return key
}

func setOpt(dst **string, v string) {
	if v != "" {
		*dst = &v
	}
}

func isPanic(err error) bool {
	_, ok := errchain.As[*errorhandler.PanicError](err)
	return ok
}

func errorMessage(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// description returns the MPFE's errorDescription. The texts are few and shared between events.
func description(f failure) *string {
	var what string
	if de, ok := errchain.As[*errorhandler.DecodeError](f.err); ok {
		return sharedText(string(f.phase), " phase: the record's ", string(de.Part), " could not be decoded")
	}
	switch {
	case isPanic(f.err):
		what = "the handler panicked"
	case f.phase == errorhandler.PhaseDecode:
		what = "the record could not be decoded"
	default:
		what = "the handler returned an error"
	}
	return sharedText(string(f.phase), " phase: ", what)
}

// eventWithHeaders returns ev with its metadata header map filled from hs, as it is written.
func eventWithHeaders(ev *avro.Event, hs []errorhandler.Header) *avro.Event {
	out := *ev
	meta := *ev.Payload.FailedMessageMetadata
	if meta.Headers == nil {
		meta.Headers = headerMap(hs)
	}
	out.Payload.FailedMessageMetadata = &meta
	return &out
}

// headerMap returns the metadata header map the way avro.Metadata.SetHeaders writes it: every
// header by name (the last value wins, null as empty bytes) plus the ordered list entry.
func headerMap(hs []errorhandler.Header) map[string][]byte {
	m := make(map[string][]byte, len(hs)+3)
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

// traceSizeHint is the first capacity of a stack trace's text: most chains (a few errors with
// their types) fit.
const traceSizeHint = 128

// maxChainDepth bounds how deep error chains are walked.
const maxChainDepth = 32

// stackTrace describes err for the MPFE's stackTrace field: each error of the chain with its
// type, and the goroutine stack of a panic.
func stackTrace(err error) string {
	if err == nil {
		return ""
	}
	// One allocation for the common chains, not one per doubling.
	b := appendStackTrace(make([]byte, 0, traceSizeHint), err)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendStackTrace appends the text of stackTrace(err) to b.
func appendStackTrace(b []byte, err error) []byte {
	if err == nil {
		return b
	}
	var panics []*errorhandler.PanicError
	b = appendChain(b, err, "", 0, &panics)
	for _, pe := range panics {
		b = append(b, '\n')
		b = append(b, pe.Stack...)
	}
	return b
}

func appendChain(b []byte, err error, prefix string, depth int, panics *[]*errorhandler.PanicError) []byte {
	for ; err != nil && depth < maxChainDepth; depth++ {
		b = append(b, prefix...)
		b = append(b, typeName(err)...)
		b = append(b, ": "...)
		b = appendOneLine(b, err.Error())
		b = append(b, '\n')
		if pe, ok := err.(*errorhandler.PanicError); ok {
			*panics = append(*panics, pe)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for i, e := range u.Unwrap() {
				b = appendChain(b, e, fmt.Sprintf("%s  [%d] ", indent(prefix), i), depth+1, panics)
			}
			return b
		case interface{ Unwrap() error }:
			err = u.Unwrap()
			prefix = indent(prefix) + "caused by "
		default:
			return b
		}
	}
	return b
}

func indent(prefix string) string {
	return strings.Repeat(" ", len(prefix)-len(strings.TrimLeft(prefix, " ")))
}

// appendOneLine appends s with its line breaks escaped (\r, \n).
func appendOneLine(b []byte, s string) []byte {
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		if s[i] == '\r' {
			b = append(b, `\r`...)
		} else {
			b = append(b, `\n`...)
		}
		s = s[i+1:]
	}
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

// cutStackTraceBytes is cutStackTrace on bytes; it may write to b's array.
func cutStackTraceBytes(b []byte) []byte {
	if len(b) <= avro.MaxStackTrace {
		return b
	}
	n := avro.MaxStackTrace
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return append(b[:n], "..."...)
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
		case *errorhandler.DecodeError:
			b = append(b, "part="...)
			b = append(b, e.Part...)
			b = append(b, ';')
		case *errorhandler.PanicError:
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
