package avro

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Framings of an Avro payload.
const (
	// FramingSingleObject is Avro's single-object encoding: 0xC3 0x01, an 8-byte fingerprint.
	FramingSingleObject = "single-object"
	// FramingConfluent is the Confluent wire format: 0x00, a 4-byte big-endian schema id.
	FramingConfluent = "confluent"
)

// ErrNoRegistry means a payload names a registry schema id and no registry is configured.
var ErrNoRegistry = errors.New("no schema registry configured")

// PayloadError says why a payload could not be decoded; its text is safe to show an operator.
type PayloadError struct {
	// Framing is the framing found, empty when none.
	Framing string
	// Err is ErrUnknownFraming (neither Avro framing), ErrUnknownSchema (neither configured
	// nor in the registry), ErrNoRegistry, ErrTooLarge or ErrInvalidDatum.
	Err error
	// Detail is a sentence naming what was wrong and where.
	Detail string
}

func (e *PayloadError) Error() string { return e.Detail }

// Unwrap returns the sentinel error.
func (e *PayloadError) Unwrap() error { return e.Err }

// DecodedPayload is a payload decoded with its writer schema.
type DecodedPayload struct {
	// Framing is FramingSingleObject or FramingConfluent.
	Framing string
	// SchemaID is the registry id of a Confluent-framed payload; 0 otherwise.
	SchemaID int
	// Fingerprint is the hex CRC-64-AVRO fingerprint of a single-object payload; "" otherwise.
	Fingerprint string
	// Subject is the registry subject under which the schema was found, when one was needed.
	Subject string
	// JSON is the datum in Avro's JSON encoding (unions as {"type": value}), compact.
	JSON []byte
}

// Describe names the framing and schema, e.g. "Confluent wire format, schema id 7".
func (p *DecodedPayload) Describe() string {
	if p.Framing == FramingConfluent {
		return fmt.Sprintf("Confluent wire format, schema id %d", p.SchemaID)
	}
	return "single-object encoding, schema fingerprint " + p.Fingerprint
}

// PayloadDecoderConfig configures a PayloadDecoder.
type PayloadDecoderConfig struct {
	// Registry resolves the schema ids of Confluent-framed payloads. Optional: without it
	// such payloads get ErrNoRegistry.
	Registry Registry
	// Schemas are Avro schemas (JSON) tried on single-object payloads by fingerprint. The
	// event and key schemas of the contract are always known.
	Schemas []string
	// MaxBytes bounds the payloads decoded. Defaults to 4 MiB.
	MaxBytes int
	// MaxCachedSchemas bounds the compiled registry schemas kept. Defaults to 1000.
	MaxCachedSchemas int
}

// Defaults of PayloadDecoderConfig.
const (
	DefaultPayloadMaxBytes  = 4 << 20
	DefaultMaxCachedSchemas = 1000
)

// PayloadDecoder decodes Kafka payloads framed as Avro (single-object encoding or the
// Confluent wire format) with their writer schema: a configured one by fingerprint, or the
// registry's by id. Every datum passes the guard walk before it is decoded, so hostile bytes
// cannot make it allocate what they claim. It is safe for concurrent use.
type PayloadDecoder struct {
	registry  Registry
	known     map[[8]byte]*Schema
	maxBytes  int
	maxCached int

	mu  sync.Mutex
	ids map[int]*registrySchema
}

// registrySchema is a compiled registry schema and the subject it was found under.
type registrySchema struct {
	schema  *Schema
	subject string
}

// NewPayloadDecoder returns a decoder for cfg; a schema that does not compile is an error
// naming its position in cfg.Schemas.
func NewPayloadDecoder(cfg PayloadDecoderConfig) (*PayloadDecoder, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultPayloadMaxBytes
	}
	if cfg.MaxCachedSchemas == 0 {
		cfg.MaxCachedSchemas = DefaultMaxCachedSchemas
	}
	if cfg.MaxBytes < 0 || cfg.MaxCachedSchemas < 0 {
		return nil, errors.New("invalid config: MaxBytes and MaxCachedSchemas must not be negative")
	}
	d := &PayloadDecoder{registry: cfg.Registry, known: map[[8]byte]*Schema{}, maxBytes: cfg.MaxBytes,
		maxCached: cfg.MaxCachedSchemas, ids: map[int]*registrySchema{}}
	for _, s := range []string{EventSchema(), KeySchema()} {
		sc, err := CompileSchema(s)
		if err != nil {
			return nil, fmt.Errorf("built-in schema: %w", err)
		}
		d.known[sc.Fingerprint()] = sc
	}
	for i, s := range cfg.Schemas {
		sc, err := CompileSchema(s)
		if err != nil {
			return nil, fmt.Errorf("invalid config: Schemas[%d]: %w", i, err)
		}
		d.known[sc.Fingerprint()] = sc
	}
	return d, nil
}

// Decode decodes b, the key or value (part) of a record of topic. The error is a
// *PayloadError wrapping ErrUnknownFraming, ErrUnknownSchema, ErrNoRegistry, ErrTooLarge or
// ErrInvalidDatum.
func (d *PayloadDecoder) Decode(topic, part string, b []byte) (*DecodedPayload, error) {
	if len(b) > d.maxBytes {
		return nil, &PayloadError{Err: ErrTooLarge,
			Detail: fmt.Sprintf("the %s has %d bytes, more than the %d decoded as Avro", part, len(b), d.maxBytes)}
	}
	switch {
	case len(b) >= 10 && b[0] == 0xc3 && b[1] == 0x01:
		fp := [8]byte(b[2:10])
		out := &DecodedPayload{Framing: FramingSingleObject, Fingerprint: hex.EncodeToString(fp[:])}
		sc, ok := d.known[fp]
		if !ok {
			return nil, &PayloadError{Framing: out.Framing, Err: ErrUnknownSchema,
				Detail: fmt.Sprintf("the %s is in Avro single-object encoding with schema fingerprint %s, which is not among the configured schemas", part, out.Fingerprint)}
		}
		return d.datum(sc, b[10:], part, out)
	case len(b) >= 5 && b[0] == 0x00:
		id := int(binary.BigEndian.Uint32(b[1:5]))
		out := &DecodedPayload{Framing: FramingConfluent, SchemaID: id}
		if d.registry == nil {
			return nil, &PayloadError{Framing: out.Framing, Err: ErrNoRegistry,
				Detail: fmt.Sprintf("the %s may be in the Confluent wire format with schema id %d, but no schema registry is configured", part, id)}
		}
		rs, err := d.schemaByID(topic, part, id)
		if err != nil {
			return nil, err
		}
		out.Subject = rs.subject
		return d.datum(rs.schema, b[5:], part, out)
	}
	return nil, &PayloadError{Err: ErrUnknownFraming,
		Detail: fmt.Sprintf("the %s is not framed as Avro (single-object encoding 0xC3 0x01, or the Confluent wire format 0x00 and a schema id)", part)}
}

func (d *PayloadDecoder) datum(sc *Schema, datum []byte, part string, out *DecodedPayload) (*DecodedPayload, error) {
	js, err := sc.DatumJSON(datum)
	if err != nil {
		detail := fmt.Sprintf("the %s is in the %s, but the datum does not decode", part, out.Describe())
		var de *DecodeError
		if errors.As(err, &de) {
			detail += ": " + de.Error()
		}
		return nil, &PayloadError{Framing: out.Framing, Err: ErrInvalidDatum, Detail: detail}
	}
	out.JSON = js
	return out, nil
}

// schemaByID returns the compiled registry schema with id. A registry serves a schema by id
// alone; the mock registry, and registries that scope ids by context, want a subject, so the
// TopicNameStrategy subject (topic-part) and then every subject the registry lists for the id
// are tried too.
func (d *PayloadDecoder) schemaByID(topic, part string, id int) (*registrySchema, error) {
	d.mu.Lock()
	rs, ok := d.ids[id]
	d.mu.Unlock()
	if ok {
		return rs, nil
	}
	var (
		info    RegistrySchema
		subject string
		lastErr error
		found   bool
	)
	try := func(subjects ...string) {
		for _, s := range subjects {
			if found {
				return
			}
			i, err := d.registry.SchemaByID(context.Background(), s, id)
			if err != nil {
				lastErr = err
				continue
			}
			info, subject, found = i, s, true
		}
	}
	try("", topic+"-"+part)
	if !found {
		if subjects, err := d.registry.SubjectsByID(context.Background(), id); err == nil {
			try(subjects...)
		}
	}
	if !found {
		return nil, &PayloadError{Framing: FramingConfluent, Err: ErrUnknownSchema,
			Detail: fmt.Sprintf("the %s names schema id %d, which the schema registry does not serve: %v", part, id, lastErr)}
	}
	if t := strings.ToUpper(info.Type); t != "" && t != "AVRO" {
		return nil, &PayloadError{Framing: FramingConfluent, Err: ErrUnknownSchema,
			Detail: fmt.Sprintf("the %s names schema id %d, a %s schema, not Avro", part, id, t)}
	}
	sc, err := CompileSchema(info.Schema)
	if err != nil {
		return nil, &PayloadError{Framing: FramingConfluent, Err: ErrUnknownSchema,
			Detail: fmt.Sprintf("the %s names schema id %d, which does not compile: %v", part, id, err)}
	}
	rs = &registrySchema{schema: sc, subject: subject}
	d.mu.Lock()
	if len(d.ids) >= d.maxCached {
		clear(d.ids)
	}
	d.ids[id] = rs
	d.mu.Unlock()
	return rs, nil
}

// EncodeJSON encodes an edited datum, given in Avro's JSON encoding (as Decode shows it: unions
// as {"branch": value}), with the writer schema and framing of like (a payload Decode reads),
// so that a repaired payload keeps its schema id or fingerprint. The error is a *PayloadError
// that says why the edit does not fit the schema.
func (d *PayloadDecoder) EncodeJSON(topic, part string, like, datumJSON []byte) ([]byte, error) {
	var (
		sc   *Schema
		head []byte
	)
	switch {
	case len(like) >= 10 && like[0] == 0xc3 && like[1] == 0x01:
		fp := [8]byte(like[2:10])
		s, ok := d.known[fp]
		if !ok {
			return nil, &PayloadError{Framing: FramingSingleObject, Err: ErrUnknownSchema,
				Detail: fmt.Sprintf("the %s's schema (fingerprint %x) is not among the configured schemas", part, fp)}
		}
		sc, head = s, like[:10]
	case len(like) >= 5 && like[0] == 0x00:
		id := int(binary.BigEndian.Uint32(like[1:5]))
		if d.registry == nil {
			return nil, &PayloadError{Framing: FramingConfluent, Err: ErrNoRegistry,
				Detail: fmt.Sprintf("the %s names schema id %d, but no schema registry is configured", part, id)}
		}
		rs, err := d.schemaByID(topic, part, id)
		if err != nil {
			return nil, err
		}
		sc, head = rs.schema, like[:5]
	default:
		return nil, &PayloadError{Err: ErrUnknownFraming, Detail: fmt.Sprintf("the %s is not framed as Avro: edit it as bytes, text or JSON", part)}
	}
	native, rest, err := sc.sc.codec.NativeFromTextual(datumJSON)
	if err == nil && len(bytes.TrimSpace(rest)) > 0 {
		err = fmt.Errorf("%d bytes after the JSON value", len(bytes.TrimSpace(rest)))
	}
	if err != nil {
		return nil, &PayloadError{Err: ErrInvalidDatum, Detail: fmt.Sprintf("the edited %s does not fit its writer schema: %v", part, err)}
	}
	out, err := sc.sc.codec.BinaryFromNative(append([]byte(nil), head...), native)
	if err != nil {
		return nil, &PayloadError{Err: ErrInvalidDatum, Detail: fmt.Sprintf("the edited %s does not fit its writer schema: %v", part, err)}
	}
	return out, nil
}
