// Package orderingkey encodes the record keys of the ordering guard's Kafka store: the
// consumed topic, its partition and the guard's own key, so that one compacted topic holds the
// state of every guarded partition of a consumer group.
package orderingkey

import (
	"encoding/binary"
)

// Encode returns the store's record key of key on topic's partition: the topic's length
// (2 bytes big-endian), the topic, the partition (4 bytes big-endian), then key.
func Encode(topic string, partition int32, key []byte) []byte {
	b := make([]byte, 0, 6+len(topic)+len(key))
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	return append(b, key...)
}

// Decode returns the guard's key of a store record key, and whether the record belongs to
// topic's partition.
func Decode(b []byte, topic string, partition int32) (string, bool) {
	if len(b) < 6 {
		return "", false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 6+n || string(b[2:2+n]) != topic || int32(binary.BigEndian.Uint32(b[2+n:])) != partition {
		return "", false
	}
	return string(b[6+n:]), true
}
