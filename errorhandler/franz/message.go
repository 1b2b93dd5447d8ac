package franz

import (
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/errorhandler"
)

// The record headers are handed over without copying: kgo.RecordHeader and
// errorhandler.Header have the same layout (checked by TestHeaderLayout).
func headers(hs []kgo.RecordHeader) []errorhandler.Header {
	if len(hs) == 0 {
		return nil
	}
	return unsafe.Slice((*errorhandler.Header)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// Message returns rec as the middleware sees it (Raw is rec). It copies no bytes.
func Message(rec *kgo.Record) errorhandler.Message {
	return errorhandler.Message{
		Topic:     rec.Topic,
		Partition: rec.Partition,
		Offset:    rec.Offset,
		Key:       rec.Key,
		Value:     rec.Value,
		Headers:   headers(rec.Headers),
		Timestamp: rec.Timestamp,
		Raw:       rec,
	}
}

// Record returns the *kgo.Record behind a record handed to a Handler by this adapter's Runner,
// or nil when m came from elsewhere.
func Record(m *errorhandler.Message) *kgo.Record {
	r, _ := m.Raw.(*kgo.Record)
	return r
}
