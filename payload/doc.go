// Package payload is redrive's one payload decoder: it turns the key or value of a failed
// record into JSON for the operators' views, and an operator's edit of that JSON back into
// bytes for a repair, with the record's own writer schema.
//
// Formats:
//
//   - Avro, in Avro's single-object encoding or the Confluent wire format (avro.PayloadDecoder
//     does the work).
//   - Protobuf in the Confluent wire format: 0x00, the 4-byte schema id, the message-index
//     list (zig-zag varints; a single 0 for the file's first message), then the message. The
//     schema text the registry serves is compiled with bufbuild/protocompile, together with
//     the schemas it references (imports registered as subjects) and the well-known types;
//     the message is decoded with dynamicpb and rendered per protojson (Timestamp as RFC 3339,
//     int64 as a string, field names in lowerCamelCase).
//   - JSON Schema in the Confluent wire format: 0x00, the schema id, then a JSON document. The
//     document is shown as it is, with the result of validating it against the schema
//     (santhosh-tekuri/jsonschema); a document that does not validate is still shown.
//   - Plain JSON, unframed: shown as it is.
//
// The registry says which format a schema id is (its schema type); the decoder never guesses
// from the bytes beyond the framing. Re-encoding keeps the framing byte for byte: the same
// schema id, the same message indexes. An edit that does not fit the schema is refused with an
// *avro.PayloadError whose text names the field.
//
// The package holds no registry client: it takes an avro.Registry (avro/confluentsr or
// avro/franzsr). It builds without cgo and links no module of confluent-kafka-go, and the
// consumer middleware does not import it.
//
// Every decoder bounds its input (MaxBytes) and returns an error, never a panic, on hostile
// bytes (the fuzz tests prove it).
package payload
