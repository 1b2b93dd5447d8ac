package payload

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redrive/redrive/avro"
)

// Formats of a decoded payload.
const (
	FormatAvro       = "avro"
	FormatProtobuf   = "protobuf"
	FormatJSONSchema = "jsonschema"
	FormatJSON       = "json"
)

// Framings of a payload: avro.FramingConfluent and avro.FramingSingleObject, or FramingNone
// for plain JSON.
const FramingNone = "none"

// Decoded is a payload decoded with its writer schema.
type Decoded struct {
	// Format is FormatAvro, FormatProtobuf, FormatJSONSchema or FormatJSON.
	Format string
	// Framing is avro.FramingConfluent, avro.FramingSingleObject or FramingNone.
	Framing string
	// SchemaID is the registry id of a Confluent-framed payload; 0 otherwise.
	SchemaID int
	// Fingerprint is the hex CRC-64-AVRO fingerprint of a single-object payload; "" otherwise.
	Fingerprint string
	// Subject is the registry subject under which the schema was found, when one was needed.
	Subject string
	// MessageType is the full name of a Protobuf payload's message type.
	MessageType string
	// MessageIndexes are a Protobuf payload's message indexes as framed ([0] for the file's
	// first message).
	MessageIndexes []int
	// JSON is the payload as JSON, compact: Avro's JSON encoding (unions as {"type": value}),
	// protojson for Protobuf, the document itself for JSON Schema and plain JSON.
	JSON []byte
	// Validation is the result of validating a JSON Schema payload; nil for other formats.
	Validation *Validation
	// Note, when not empty, says what the JSON does not show (a Protobuf payload's fields
	// that its schema does not declare).
	Note string
}

// Validation is the result of validating a document against its JSON Schema.
type Validation struct {
	Valid bool
	// Errors name each place that does not validate ("/customer/email: …"), at most
	// MaxValidationErrors.
	Errors []string
}

// MaxValidationErrors bounds Validation.Errors.
const MaxValidationErrors = 20

// Describe names the format, framing and schema, e.g. "Protobuf message shop.Order in the
// Confluent wire format, schema id 7".
func (p *Decoded) Describe() string {
	switch p.Format {
	case FormatProtobuf:
		return fmt.Sprintf("Protobuf message %s in the Confluent wire format, schema id %d, message indexes %v", p.MessageType, p.SchemaID, p.MessageIndexes)
	case FormatJSONSchema:
		return fmt.Sprintf("JSON Schema in the Confluent wire format, schema id %d", p.SchemaID)
	case FormatJSON:
		return "plain JSON"
	}
	if p.Framing == avro.FramingConfluent {
		return fmt.Sprintf("Avro in the Confluent wire format, schema id %d", p.SchemaID)
	}
	return "Avro in the single-object encoding, schema fingerprint " + p.Fingerprint
}

// Config configures a Decoder.
type Config struct {
	// Registry resolves the schema ids of Confluent-framed payloads. Optional: without it
	// such payloads get avro.ErrNoRegistry. Protobuf schemas that import others and JSON
	// Schemas with references need an avro.ReferenceRegistry.
	Registry avro.Registry
	// Schemas are Avro schemas (JSON) tried on single-object payloads by fingerprint.
	Schemas []string
	// MaxBytes bounds the payloads decoded. Defaults to avro.DefaultPayloadMaxBytes (4 MiB).
	MaxBytes int
	// MaxCachedSchemas bounds the compiled registry schemas kept. Defaults to 1000.
	MaxCachedSchemas int
	// Timeout bounds the registry look-ups of one schema id. Defaults to 10s.
	Timeout time.Duration
}

// DefaultTimeout is the default of Config.Timeout.
const DefaultTimeout = 10 * time.Second

// Decoder decodes payloads of every format with their writer schema, and encodes edits of them
// back. It is safe for concurrent use.
type Decoder struct {
	avro      *avro.PayloadDecoder
	registry  avro.Registry
	maxBytes  int
	maxCached int
	timeout   time.Duration

	mu  sync.Mutex
	ids map[int]*schemaEntry
}

// schemaEntry is a registry schema, compiled for its format.
type schemaEntry struct {
	format  string // FormatAvro, FormatProtobuf or FormatJSONSchema
	subject string
	proto   *protoSchema
	json    *jsonSchema
}

// New returns a Decoder for cfg, or an error starting with "invalid config".
func New(cfg Config) (*Decoder, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = avro.DefaultPayloadMaxBytes
	}
	if cfg.MaxCachedSchemas == 0 {
		cfg.MaxCachedSchemas = avro.DefaultMaxCachedSchemas
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBytes < 0 || cfg.MaxCachedSchemas < 0 || cfg.Timeout < 0 {
		return nil, errors.New("invalid config: MaxBytes, MaxCachedSchemas and Timeout must not be negative")
	}
	a, err := avro.NewPayloadDecoder(avro.PayloadDecoderConfig{Registry: cfg.Registry, Schemas: cfg.Schemas,
		MaxBytes: cfg.MaxBytes, MaxCachedSchemas: cfg.MaxCachedSchemas})
	if err != nil {
		return nil, err
	}
	return &Decoder{avro: a, registry: cfg.Registry, maxBytes: cfg.MaxBytes, maxCached: cfg.MaxCachedSchemas,
		timeout: cfg.Timeout, ids: map[int]*schemaEntry{}}, nil
}

// Decode decodes b, the key or value (part) of a record of topic, with its writer schema.
// The error is an *avro.PayloadError, whose text is safe to show an operator, wrapping
// avro.ErrUnknownFraming, avro.ErrUnknownSchema, avro.ErrNoRegistry, avro.ErrTooLarge or
// avro.ErrInvalidDatum.
func (d *Decoder) Decode(topic, part string, b []byte) (*Decoded, error) {
	if len(b) > d.maxBytes {
		return nil, &avro.PayloadError{Err: avro.ErrTooLarge,
			Detail: fmt.Sprintf("the %s has %d bytes, more than the %d decoded", part, len(b), d.maxBytes)}
	}
	if len(b) >= 5 && b[0] == 0x00 && d.registry != nil {
		id := int(binary.BigEndian.Uint32(b[1:5]))
		e, err := d.schemaByID(topic, part, id)
		if err != nil {
			return nil, err
		}
		out := &Decoded{Format: e.format, Framing: avro.FramingConfluent, SchemaID: id, Subject: e.subject}
		switch e.format {
		case FormatProtobuf:
			return e.proto.decode(part, b, out)
		case FormatJSONSchema:
			return e.json.decode(part, b, out)
		}
	}
	if len(b) > 0 && b[0] != 0x00 && !(len(b) >= 2 && b[0] == 0xc3 && b[1] == 0x01) && json.Valid(b) {
		var c bytes.Buffer
		if json.Compact(&c, b) == nil {
			return &Decoded{Format: FormatJSON, Framing: FramingNone, JSON: c.Bytes()}, nil
		}
	}
	a, err := d.avro.Decode(topic, part, b)
	if err != nil {
		var pe *avro.PayloadError
		if errors.As(err, &pe) && errors.Is(err, avro.ErrUnknownFraming) {
			return nil, &avro.PayloadError{Err: avro.ErrUnknownFraming,
				Detail: fmt.Sprintf("the %s is neither JSON nor framed for a schema (Avro single-object encoding 0xC3 0x01, or the Confluent wire format 0x00 and a schema id)", part)}
		}
		return nil, err
	}
	return &Decoded{Format: FormatAvro, Framing: a.Framing, SchemaID: a.SchemaID, Fingerprint: a.Fingerprint,
		Subject: a.Subject, JSON: a.JSON}, nil
}

// Encode encodes edited, the JSON of an edited payload as Decode shows it, with the writer
// schema and framing of like (a payload Decode reads), so that a repaired payload keeps its
// schema id, message indexes or fingerprint byte for byte. format is the format the editor
// meant (FormatAvro, FormatProtobuf or FormatJSONSchema); a payload of another format is
// refused. The error is an *avro.PayloadError that says why the edit does not fit, naming
// the field where the schema's library does.
func (d *Decoder) Encode(topic, part, format string, like, edited []byte) ([]byte, error) {
	got, err := d.Decode(topic, part, like)
	if err != nil {
		return nil, err
	}
	if got.Format != format {
		return nil, &avro.PayloadError{Framing: got.Framing, Err: avro.ErrUnknownSchema,
			Detail: fmt.Sprintf("the %s is %s, not %s: edit it in that format", part, formatName(got.Format), formatName(format))}
	}
	if len(edited) > d.maxBytes {
		return nil, &avro.PayloadError{Err: avro.ErrTooLarge,
			Detail: fmt.Sprintf("the edited %s has %d bytes, more than the %d encoded", part, len(edited), d.maxBytes)}
	}
	switch format {
	case FormatAvro:
		return d.avro.EncodeJSON(topic, part, like, edited)
	case FormatProtobuf, FormatJSONSchema:
		id := int(binary.BigEndian.Uint32(like[1:5]))
		e, err := d.schemaByID(topic, part, id)
		if err != nil {
			return nil, err
		}
		if format == FormatProtobuf {
			return e.proto.encode(part, like, edited)
		}
		return e.json.encode(part, like, edited)
	}
	return nil, &avro.PayloadError{Err: avro.ErrUnknownFraming, Detail: fmt.Sprintf("the %s is plain JSON: edit it as JSON", part)}
}

// formatName names a format in a sentence.
func formatName(f string) string {
	switch f {
	case FormatAvro:
		return "Avro"
	case FormatProtobuf:
		return "Protobuf"
	case FormatJSONSchema:
		return "JSON Schema"
	}
	return "plain JSON"
}

// schemaByID returns the compiled registry schema with id. A registry serves a schema by id
// alone; the mock registry, and registries that scope ids by context, want a subject, so the
// TopicNameStrategy subject (topic-part) and then every subject the registry lists for the id
// are tried too.
func (d *Decoder) schemaByID(topic, part string, id int) (*schemaEntry, error) {
	d.mu.Lock()
	e, ok := d.ids[id]
	d.mu.Unlock()
	if ok {
		return e, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	var (
		info    avro.RegistrySchema
		subject string
		lastErr error
		found   bool
	)
	try := func(subjects ...string) {
		for _, s := range subjects {
			if found {
				return
			}
			i, err := d.registry.SchemaByID(ctx, s, id)
			if err != nil {
				lastErr = err
				continue
			}
			info, subject, found = i, s, true
		}
	}
	try("", topic+"-"+part)
	if !found {
		if subjects, err := d.registry.SubjectsByID(ctx, id); err == nil {
			try(subjects...)
		}
	}
	if !found {
		return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrUnknownSchema,
			Detail: fmt.Sprintf("the %s names schema id %d, which the schema registry does not serve: %v", part, id, lastErr)}
	}
	e = &schemaEntry{subject: subject}
	var err error
	switch t := strings.ToUpper(info.Type); t {
	case "", "AVRO":
		e.format = FormatAvro
	case "PROTOBUF":
		e.format = FormatProtobuf
		e.proto, err = compileProto(ctx, d.registry, id, info)
	case "JSON":
		e.format = FormatJSONSchema
		e.json, err = compileJSONSchema(ctx, d.registry, id, info)
	default:
		err = fmt.Errorf("schema type %s is not Avro, Protobuf or JSON", t)
	}
	if err != nil {
		return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrUnknownSchema,
			Detail: fmt.Sprintf("the %s names schema id %d, which does not compile: %v", part, id, err)}
	}
	d.mu.Lock()
	if len(d.ids) >= d.maxCached {
		clear(d.ids)
	}
	d.ids[id] = e
	d.mu.Unlock()
	return e, nil
}

// references returns the schemas that info refers to, transitively, by the names the
// referring schemas use. At most maxReferences are followed.
func references(ctx context.Context, reg avro.Registry, info avro.RegistrySchema) (map[string]avro.RegistrySchema, error) {
	out := map[string]avro.RegistrySchema{}
	if len(info.References) == 0 {
		return out, nil
	}
	rr, ok := reg.(avro.ReferenceRegistry)
	if !ok {
		return nil, errors.New("the schema has references and the registry client cannot look them up")
	}
	queue := append([]avro.RegistryReference(nil), info.References...)
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if _, done := out[ref.Name]; done {
			continue
		}
		if len(out) >= maxReferences {
			return nil, fmt.Errorf("more than %d referenced schemas", maxReferences)
		}
		s, err := rr.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return nil, fmt.Errorf("reference %q (subject %s version %d): %w", ref.Name, ref.Subject, ref.Version, err)
		}
		out[ref.Name] = s
		queue = append(queue, s.References...)
	}
	return out, nil
}

// maxReferences bounds the schemas one schema may refer to, transitively.
const maxReferences = 100
