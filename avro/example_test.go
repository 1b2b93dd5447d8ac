package avro_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/redrive/redrive/avro"
)

func Example() {
	codec, err := avro.NewCodec(avro.Config{}) // no registry: single-object encoding
	if err != nil {
		panic(err)
	}
	md := &avro.Metadata{EventID: avro.Ptr("order-42")}
	_ = md.SetHeaders([]avro.Header{{Name: "trace", Value: []byte("t-1")}, {Name: "trace", Value: []byte("t-2")}})
	event := &avro.Event{
		Identity:  avro.Identity{EventID: "e-1", IdempotenceID: "i-1", Created: time.UnixMilli(1780000000123).UTC()},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		Publisher: avro.Publisher{System: "shop", Service: "billing"},
		References: avro.References{
			Message:   avro.MessageReference{Type: avro.MessageReferenceType, TopicName: "orders", Partition: 3, Offset: 4711},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: avro.Temporary, Code: "DB_DOWN"},
		},
		Payload:            avro.Payload{OriginalMessage: []byte(`{"id":42}`), ErrorMessage: "db down", FailedMessageMetadata: md},
		DomainEventVersion: avro.DomainEventVersion,
	}
	b, err := codec.EncodeEvent("errors", event)
	if err != nil {
		panic(err)
	}
	decoded, err := codec.DecodeEvent("errors", b)
	if err != nil {
		panic(err)
	}
	headers, _ := decoded.Payload.FailedMessageMetadata.OriginalHeaders()
	fmt.Printf("first byte 0x%X, %s at %s/%d/%d, %d headers in order\n", b[0],
		decoded.References.ErrorType.Temporality, decoded.References.Message.TopicName,
		decoded.References.Message.Partition, decoded.References.Message.Offset, len(headers))

	_, err = codec.DecodeEvent("errors", b[:len(b)-3])
	var de *avro.DecodeError
	fmt.Println(errors.As(err, &de), de.Check)
	// Output:
	// first byte 0xC3, TEMPORARY at orders/3/4711, 2 headers in order
	// true truncated datum
}
