package errorhandler

import (
	"encoding/hex"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/redrive/redrive/avro"
)

// jobSink receives the outcome of a job. Its methods are called from the producer's event loop
// or a retry timer and must not block.
type jobSink interface {
	// jobDone is called once with the final outcome: nil when the error topic acknowledged the
	// MPFE, otherwise why it was given up.
	jobDone(j *job, err error)
	// jobFailing is called for each failed attempt (the job is retried).
	jobFailing(j *job, err error)
}

// job is one MPFE on its way to the error topic. Its owner (a partition's offset slot or a
// Delivery) embeds it, so a dead-lettered record costs one allocation for its bookkeeping,
// event and produce request together.
type job struct {
	msg  *kafka.Message
	f    failure
	ev   avro.Event
	meta avro.Metadata
	key  string
	out  kafka.Message // the produce request; Key and Value point into the encoding buffer of the last attempt
	sink jobSink

	prev, next *job // under DeadLetterer.mu: the jobs not finished yet

	attempts  int
	lastErr   error
	failing   bool        // under DeadLetterer.mu: counted in retrying
	timer     *time.Timer // under DeadLetterer.mu: pending retry
	cancelErr atomic.Pointer[error]
	finished  atomic.Bool
}

// initJob prepares j, embedded in its owner, to publish the MPFE of msg's failure f.
func (d *DeadLetterer) initJob(j *job, msg *kafka.Message, f failure, sink jobSink) {
	var info MessageInfo
	if d.cfg.Extractor != nil {
		info = d.cfg.Extractor(msg)
	}
	j.msg, j.f, j.sink = msg, f, sink
	j.key = fillEvent(&j.ev, &j.meta, msg, f, d.cfg.System, d.cfg.Service, d.newIDs(), d.cfg.Clock(), info)
	j.out = kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &d.cfg.ErrorTopic, Partition: kafka.PartitionAny},
		Opaque:         j,
	}
}

// newIDs returns two random (version 4) UUIDs: the MPFE's event id and idempotence id.
func (d *DeadLetterer) newIDs() [2]string {
	var raw [32]byte
	if _, err := io.ReadFull(d.ids, raw[:]); err != nil {
		a, b := uuid.New(), uuid.New() // panics only when the system has no randomness at all
		copy(raw[:16], a[:])
		copy(raw[16:], b[:])
	}
	var text [72]byte
	for i := range 2 {
		u := raw[i*16 : i*16+16]
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		encodeUUID(text[i*36:i*36+36], u)
	}
	s := string(text[:])
	return [2]string{s[:36], s[36:]}
}

// encodeUUID writes u in its canonical 36-character form to dst.
func encodeUUID(dst, u []byte) {
	hex.Encode(dst[0:8], u[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], u[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], u[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], u[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], u[10:])
}

// encodeBufs holds buffers for encoding MPFEs; buffers above maxPooledBuf are not kept.
var encodeBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 4096)
	return &b
}}

const maxPooledBuf = 64 << 10

func putEncodeBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledBuf {
		encodeBufs.Put(bp)
	}
}
