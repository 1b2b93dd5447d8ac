package engine

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/internal/uuidtext"
)

// jobSink receives the outcome of a job. Its methods are called from the producer's delivery
// callbacks or a retry timer and must not block.
type jobSink interface {
	// jobDone is called once with the final outcome: nil when the error topic acknowledged the
	// MPFE, otherwise why it was given up.
	jobDone(j *Job, err error)
	// jobFailing is called for each failed attempt (the job is retried).
	jobFailing(j *Job, err error)
}

// Job is one MPFE on its way to the error topic. Its owner (a partition's offset slot or a
// Delivery) embeds it, so a dead-lettered record costs one allocation for its bookkeeping,
// event and record copy together. A Producer passes it back in its report.
type Job struct {
	msg  errorhandler.Message
	f    failure
	ev   avro.Event
	meta avro.Metadata
	key  string
	sink jobSink
	// trace is the text the event's stack trace points to (kept here: no allocation of its own).
	trace string
	// ids and traceBuf hold the texts of a recycled job's ids and stack trace (see
	// offsetSlot.recycle): the event's strings point into them.
	ids      [72]byte
	traceBuf []byte

	// buf is the framed event followed by the framed key (from keyAt), once encoded.
	buf     []byte
	keyAt   int
	encoded bool

	prev, next *Job // under DeadLetterer.mu: the jobs not finished yet

	attempts  int
	lastErr   error
	failing   bool        // under DeadLetterer.mu: counted in retrying
	timer     *time.Timer // under DeadLetterer.mu: pending retry
	cancelErr atomic.Pointer[error]
	finished  atomic.Bool
	span      trace.Span // the MPFE's span while it records; nil otherwise
}

// Message returns the failed record the job reports.
func (j *Job) Message() *errorhandler.Message { return &j.msg }

// initJob prepares j, embedded in its owner, to publish the MPFE of msg's failure f after
// inPlace handler calls (0: in-place retries not configured).
func (d *DeadLetterer) initJob(j *Job, msg *errorhandler.Message, f failure, inPlace int, sink jobSink) {
	j.msg, j.f, j.sink = *msg, f, sink
	var info errorhandler.MessageInfo
	if d.cfg.Extractor != nil {
		info = d.cfg.Extractor(&j.msg)
	}
	var ids string
	var traceBuf *[]byte
	if s, ok := sink.(*offsetSlot); ok && s.pooled {
		// A recycled job's texts live in the job itself: nothing refers to them once its
		// record is final, when the job is recycled.
		b := errorhandler.AppendIdempotenceID(appendEventID(j.ids[:0]), d.cfg.GroupID, &j.msg)
		if len(b) == len(j.ids) && unsafe.SliceData(b) == &j.ids[0] {
			ids = unsafe.String(&j.ids[0], len(j.ids))
		} else {
			ids = string(b)
		}
		traceBuf = &j.traceBuf
	} else {
		// Both ids in one string: one allocation instead of two.
		var text [72]byte
		ids = string(errorhandler.AppendIdempotenceID(appendEventID(text[:0]), d.cfg.GroupID, &j.msg))
	}
	j.key = fillEvent(&j.ev, &j.meta, &eventParams{
		msg:             &j.msg,
		f:               f,
		system:          d.cfg.System,
		service:         d.cfg.Service,
		eventID:         ids[:36],
		idempotenceID:   ids[36:],
		now:             d.cfg.Clock(),
		info:            info,
		inPlaceAttempts: inPlace,
		trace:           &j.trace,
		traceBuf:        traceBuf,
	})
}

// newEventID returns a random (version 4) UUID: the MPFE's event id. Every event is a new
// event; its idempotenceId says which failure it reports. The bits come from math/rand/v2's
// global generator (ChaCha8, seeded by the operating system, per thread and lock-free): an
// event id must be unique, not secret.
func newEventID() string {
	var text [36]byte
	return string(appendEventID(text[:0]))
}

// appendEventID appends the text of a new event id (36 bytes, see newEventID) to b.
func appendEventID(b []byte) []byte {
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return uuidtext.Append(b, u)
}
