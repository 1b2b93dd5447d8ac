// Package avro is redrive's codec for the jEAP MessageProcessingFailedEvent (MPFE) wire contract.
//
// It holds the Go types of the event and its Kafka key record, the embedded Avro schemas (written
// from the contract, with its exact names, namespaces, field order and defaults), and the framings
// used on the topic: the Confluent wire format (0x00, a 4-byte schema id, the datum) through a
// schema registry, and Avro single-object encoding (0xC3 0x01, the CRC-64-AVRO fingerprint of the
// schema's Parsing Canonical Form, the datum) when no registry is configured. [Codec.DecodeEvent]
// accepts both framings, and the codec is the one place that decides which framing a topic
// gets ([Codec.EventFraming]). The registry is the small [Registry] interface; this package
// links no registry client (avro/franzsr adapts franz-go's, avro/confluentsr
// confluent-kafka-go's), so a consumer that links it pulls in neither. [FillFailureEvent]
// builds every MPFE redrive writes.
//
// Events are written field by field by [AppendEvent] (fast, no intermediate maps) and read by
// goavro after a guard walk over the datum that refuses hostile block counts before goavro could
// preallocate for them. Every decoding failure is a [*DecodeError] that names the check which
// failed (see [Check]) and wraps one of the sentinel errors, so callers can branch with
// errors.Is.
//
// A minimal round trip:
//
//	codec, err := avro.NewCodec(avro.Config{})
//	if err != nil { ... }
//	b, err := codec.EncodeEvent("errors", &event)
//	decoded, err := codec.DecodeEvent("errors", b)
package avro
