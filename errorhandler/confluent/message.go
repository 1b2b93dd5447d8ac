package confluent

import (
	"unsafe"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/errorhandler"
)

// The record headers are handed over without copying: kafka.Header and errorhandler.Header
// have the same layout (checked by TestHeaderLayout).
func headers(hs []kafka.Header) []errorhandler.Header {
	if len(hs) == 0 {
		return nil
	}
	return unsafe.Slice((*errorhandler.Header)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}

// Message returns msg as the middleware sees it (Raw is msg). It copies no bytes.
func Message(msg *kafka.Message) errorhandler.Message {
	m := errorhandler.Message{
		Partition: msg.TopicPartition.Partition,
		Offset:    int64(msg.TopicPartition.Offset),
		Key:       msg.Key,
		Value:     msg.Value,
		Headers:   headers(msg.Headers),
		Timestamp: msg.Timestamp,
		Raw:       msg,
	}
	if msg.TopicPartition.Topic != nil {
		m.Topic = *msg.TopicPartition.Topic
	}
	return m
}

// KafkaMessage returns the *kafka.Message behind a record handed to a Handler by this
// adapter's Runner, or nil when m came from elsewhere.
func KafkaMessage(m *errorhandler.Message) *kafka.Message {
	km, _ := m.Raw.(*kafka.Message)
	return km
}
