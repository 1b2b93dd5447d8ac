package errorhandler

import (
	"crypto/sha1"
	"encoding/binary"
	"strconv"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler/internal/uuidtext"
)

// identityNamespace is the name-space UUID of event identities (a version 5 UUID of the URL
// below in the URL name space): changing it would change every idempotenceId.
var identityNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/redrive/redrive/errorhandler/mpfe-identity/v1"))

// IdempotenceID returns the idempotenceId of the MPFE that reports a failure of msg in the
// consumer group group: a name-based UUID (version 5, SHA-1, RFC 9562) of
//
//	group, topic, partition, offset, timestamp (Unix milliseconds), redrive-origin header
//
// (each field length-prefixed). The same record failing again in the same group, e.g. because
// the consumer crashed after the event was acknowledged but before the record's offset was
// committed, gets the same id, and the service stores the failure once. A resent record is a
// new record (a new offset, and it carries the redrive-origin header), so every resend attempt
// that fails again is a new failure with its own id. The timestamp keeps records apart when a
// topic was deleted and created again and offsets start over.
func IdempotenceID(group string, msg *Message) string {
	var buf [36]byte
	return string(AppendIdempotenceID(buf[:0], group, msg))
}

// AppendIdempotenceID appends the text of IdempotenceID(group, msg) (36 bytes) to b.
func AppendIdempotenceID(b []byte, group string, msg *Message) []byte {
	origin, _ := msg.HeaderValue(avro.HeaderOrigin)
	var buf [256]byte // the name; on the stack unless it is longer
	n := append(buf[:0], identityNamespace[:]...)
	n = appendField(n, group)
	n = appendField(n, msg.Topic)
	n = binary.BigEndian.AppendUint32(n, uint32(msg.Partition))
	n = binary.BigEndian.AppendUint64(n, uint64(msg.Offset))
	n = binary.BigEndian.AppendUint64(n, uint64(msg.Timestamp.UnixMilli()))
	n = appendField(n, string(origin))
	sum := sha1.Sum(n)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return uuidtext.Append(b, u)
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}
