package avro

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/linkedin/goavro/v2"
)

var (
	//go:embed schemas/MessageProcessingFailedEvent.avsc
	eventSchema string
	//go:embed schemas/MessageProcessingFailedMessageKey.avsc
	keySchema string
	//go:embed schemas/HeaderList.avsc
	headerListSchema string
)

// EventSchema returns the Avro schema (JSON) of the MessageProcessingFailedEvent.
func EventSchema() string { return eventSchema }

// KeySchema returns the Avro schema (JSON) of the MessageProcessingFailedMessageKey.
func KeySchema() string { return keySchema }

// Framing bytes.
const (
	confluentMagic = 0x00
	singleMagic0   = 0xC3
	singleMagic1   = 0x01
	confluentHead  = 5
	singleHead     = 10
)

// DefaultMaxSize is the default size limit of an encoded event: 16 MiB, above Kafka's default
// record size, so that the failure of a near-1 MiB record still fits.
const DefaultMaxSize = 16 << 20

// schemaCodec is one compiled schema with its fingerprint.
type schemaCodec struct {
	codec       *goavro.Codec
	guard       *node
	fingerprint [8]byte // CRC-64-AVRO of the Parsing Canonical Form, little-endian
}

func compile(schema string) (*schemaCodec, error) {
	c, err := goavro.NewCodec(schema)
	if err != nil {
		return nil, err
	}
	g, err := parseGuard(schema)
	if err != nil {
		return nil, fmt.Errorf("schema guard: %w", err)
	}
	sc := &schemaCodec{codec: c, guard: g}
	binary.LittleEndian.PutUint64(sc.fingerprint[:], c.Rabin)
	return sc, nil
}

var builtin = sync.OnceValues(func() (*schemas, error) {
	ev, err := compile(eventSchema)
	if err != nil {
		return nil, fmt.Errorf("event schema: %w", err)
	}
	k, err := compile(keySchema)
	if err != nil {
		return nil, fmt.Errorf("key schema: %w", err)
	}
	h, err := compile(headerListSchema)
	if err != nil {
		return nil, fmt.Errorf("header list schema: %w", err)
	}
	return &schemas{event: ev, key: k, headers: h}, nil
})

type schemas struct {
	event, key, headers *schemaCodec
}

func mustBuiltin() *schemas {
	s, err := builtin()
	if err != nil {
		panic("avro: embedded schema does not compile: " + err.Error())
	}
	return s
}

// EventFingerprint returns the CRC-64-AVRO fingerprint (little-endian) of the event schema.
func EventFingerprint() [8]byte { return mustBuiltin().event.fingerprint }

// KeyFingerprint returns the CRC-64-AVRO fingerprint (little-endian) of the key schema.
func KeyFingerprint() [8]byte { return mustBuiltin().key.fingerprint }

// Config configures a Codec.
type Config struct {
	// Registry, when set, makes the codec write the Confluent wire format with schema ids from
	// this registry (subjects by TopicRecordNameStrategy) and resolve ids it reads there.
	// When nil, the codec writes Avro single-object encoding; it still reads Confluent framing,
	// decoding the datum with the built-in schema.
	Registry Registry
	// MaxSize bounds an encoded event or key in bytes. Defaults to DefaultMaxSize.
	MaxSize int
}

// Codec encodes and decodes framed events and keys. It is safe for concurrent use.
type Codec struct {
	registry Registry
	maxSize  int
	builtin  *schemas

	mu      sync.RWMutex
	idCache map[string]int       // subject -> registered id
	writers map[int]*schemaCodec // schema id -> writer schema (registry only)
}

// NewCodec returns a codec for cfg.
func NewCodec(cfg Config) (*Codec, error) {
	if cfg.MaxSize < 0 {
		return nil, fmt.Errorf("invalid config: MaxSize %d is negative", cfg.MaxSize)
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	s, err := builtin()
	if err != nil {
		return nil, err
	}
	return &Codec{
		registry: cfg.Registry,
		maxSize:  cfg.MaxSize,
		builtin:  s,
		idCache:  map[string]int{},
		writers:  map[int]*schemaCodec{},
	}, nil
}

// Subject returns the TopicRecordNameStrategy subject of a record full name on topic.
func Subject(topic, recordFullName string) string { return topic + "-" + recordFullName }

// MarshalEvent returns the bare Avro binary datum of e (no framing).
func MarshalEvent(e *Event) ([]byte, error) {
	return marshalEvent(nil, e)
}

func marshalEvent(buf []byte, e *Event) ([]byte, error) {
	return AppendEvent(buf, e)
}

// UnmarshalEvent decodes a bare Avro binary datum of the event schema.
func UnmarshalEvent(datum []byte) (*Event, error) {
	return decodeDatum(mustBuiltin().event, datum, "event", eventFromNative)
}

// MarshalKey returns the bare Avro binary datum of k.
func MarshalKey(k Key) ([]byte, error) {
	return AppendKey(nil, k), nil
}

// UnmarshalKey decodes a bare Avro binary datum of the key schema.
func UnmarshalKey(datum []byte) (Key, error) {
	k, err := decodeDatum(mustBuiltin().key, datum, "key", keyFromNative)
	if err != nil {
		return Key{}, err
	}
	return *k, nil
}

func keyFromNative(native any) (*Key, error) {
	r := &reader{}
	m := r.record(native, "key")
	k := &Key{Key: r.str(m, "key", "key")}
	return k, r.err
}

func decodeDatum[T any](sc *schemaCodec, datum []byte, what string, conv func(any) (*T, error)) (*T, error) {
	w := walker{buf: datum}
	if err := w.walk(sc.guard, ""); err != nil {
		return nil, err
	}
	if w.pos < len(datum) {
		return nil, decodeErr(CheckTrailing, ErrTrailingBytes, "%d bytes after the %s datum (datum is %d bytes)", len(datum)-w.pos, what, w.pos)
	}
	native, rest, err := sc.codec.NativeFromBinary(datum)
	if err != nil {
		return nil, classifyDatumErr(what, len(datum), err)
	}
	if len(rest) > 0 {
		return nil, decodeErr(CheckTrailing, ErrTrailingBytes, "%d bytes after the %s datum (datum is %d bytes)", len(rest), what, len(datum)-len(rest))
	}
	return conv(native)
}

func classifyDatumErr(what string, n int, err error) *DecodeError {
	msg := err.Error()
	if errors.Is(err, io.ErrShortBuffer) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(msg, "short buffer") || strings.Contains(msg, "EOF") {
		return &DecodeError{Check: CheckTruncated, Err: errors.Join(ErrTruncated, err),
			Detail: fmt.Sprintf("%s datum of %d bytes ends early: %v", what, n, err)}
	}
	return &DecodeError{Check: CheckDatum, Err: errors.Join(ErrInvalidDatum, err),
		Detail: fmt.Sprintf("%s datum of %d bytes: %v", what, n, err)}
}

// EventFraming returns the framing prefix that EncodeEvent writes before an event's datum on
// topic: the Confluent wire format's 5 bytes when a registry is configured (registering the
// schema on first use), else single-object encoding's 10. It is the one place that decides
// the framing; a producer that appends datums itself (AppendEvent) starts from it. The slice
// is the caller's.
func (c *Codec) EventFraming(topic string) ([]byte, error) {
	return c.header(topic, EventFullName, c.builtin.event)
}

// KeyFraming returns the framing prefix of a key record on topic, like EventFraming.
func (c *Codec) KeyFraming(topic string) ([]byte, error) {
	return c.header(topic, KeyFullName, c.builtin.key)
}

// MaxSize returns the size limit of an encoded event, in bytes.
func (c *Codec) MaxSize() int { return c.maxSize }

// EncodeEvent returns e framed for topic: Confluent wire format when a registry is configured
// (registering the schema under "<topic>-<full name>" on first use), else single-object encoding.
func (c *Codec) EncodeEvent(topic string, e *Event) ([]byte, error) {
	head, err := c.header(topic, EventFullName, c.builtin.event)
	if err != nil {
		return nil, err
	}
	out, err := marshalEvent(head, e)
	if err != nil {
		return nil, err
	}
	if len(out) > c.maxSize {
		return nil, fmt.Errorf("encode event: %w: %d bytes, limit %d", ErrTooLarge, len(out), c.maxSize)
	}
	return out, nil
}

// EncodeKey returns k framed like EncodeEvent frames events.
func (c *Codec) EncodeKey(topic string, k Key) ([]byte, error) {
	head, err := c.header(topic, KeyFullName, c.builtin.key)
	if err != nil {
		return nil, err
	}
	return AppendKey(head, k), nil
}

// EncodeEventWith frames e with an explicit framing, regardless of the configured registry:
// single-object when schemaID < 0, else Confluent framing with that schema id.
func EncodeEventWith(e *Event, schemaID int) ([]byte, error) {
	return marshalEvent(frameHead(mustBuiltin().event, schemaID), e)
}

// EncodeKeyWith frames k like EncodeEventWith.
func EncodeKeyWith(k Key, schemaID int) ([]byte, error) {
	return AppendKey(frameHead(mustBuiltin().key, schemaID), k), nil
}

func frameHead(sc *schemaCodec, schemaID int) []byte {
	if schemaID < 0 {
		head := make([]byte, singleHead, 256)
		head[0], head[1] = singleMagic0, singleMagic1
		copy(head[2:], sc.fingerprint[:])
		return head
	}
	head := make([]byte, confluentHead, 256)
	head[0] = confluentMagic
	binary.BigEndian.PutUint32(head[1:], uint32(schemaID))
	return head
}

func (c *Codec) header(topic, fullName string, sc *schemaCodec) ([]byte, error) {
	if c.registry == nil {
		return frameHead(sc, -1), nil
	}
	subject := Subject(topic, fullName)
	c.mu.RLock()
	id, ok := c.idCache[subject]
	c.mu.RUnlock()
	if !ok {
		var err error
		id, err = c.registry.Register(context.Background(), subject, sc.codec.Schema())
		if err != nil {
			return nil, fmt.Errorf("register schema under subject %q: %w", subject, err)
		}
		c.mu.Lock()
		c.idCache[subject] = id
		c.writers[id] = sc
		c.mu.Unlock()
	}
	return frameHead(sc, id), nil
}

// DecodeEvent decodes one framed event (either framing). topic is the topic the bytes were read
// from; it names the registry subject when a registry is configured and may be empty otherwise.
func (c *Codec) DecodeEvent(topic string, b []byte) (*Event, error) {
	sc, datum, err := c.unframe(topic, EventFullName, c.builtin.event, b)
	if err != nil {
		return nil, err
	}
	return decodeDatum(sc, datum, "event", eventFromNative)
}

// DecodeKey decodes one framed key record (either framing).
func (c *Codec) DecodeKey(topic string, b []byte) (Key, error) {
	sc, datum, err := c.unframe(topic, KeyFullName, c.builtin.key, b)
	if err != nil {
		return Key{}, err
	}
	k, err := decodeDatum(sc, datum, "key", keyFromNative)
	if err != nil {
		return Key{}, err
	}
	return *k, nil
}

func (c *Codec) unframe(topic, fullName string, own *schemaCodec, b []byte) (*schemaCodec, []byte, error) {
	switch {
	case len(b) == 0:
		return nil, nil, decodeErr(CheckEmpty, ErrEmpty, "no bytes to decode")
	case len(b) > c.maxSize:
		return nil, nil, decodeErr(CheckSizeLimit, ErrTooLarge, "%d bytes, limit %d", len(b), c.maxSize)
	case b[0] == singleMagic0:
		if len(b) < singleHead {
			return nil, nil, decodeErr(CheckTruncated, ErrTruncated, "single-object header needs %d bytes, got %d", singleHead, len(b))
		}
		if b[1] != singleMagic1 {
			return nil, nil, decodeErr(CheckFirstByte, ErrUnknownFraming, "byte 1 is 0x%02X, single-object encoding wants 0xC3 0x01", b[1])
		}
		if [8]byte(b[2:singleHead]) != own.fingerprint {
			return nil, nil, decodeErr(CheckFingerprint, ErrFingerprint, "fingerprint %x is not the %s schema's %x", b[2:singleHead], fullName, own.fingerprint[:])
		}
		return own, b[singleHead:], nil
	case b[0] == confluentMagic:
		if len(b) < confluentHead {
			return nil, nil, decodeErr(CheckTruncated, ErrTruncated, "Confluent header needs %d bytes, got %d", confluentHead, len(b))
		}
		id := int(binary.BigEndian.Uint32(b[1:confluentHead]))
		if c.registry == nil {
			return own, b[confluentHead:], nil
		}
		sc, err := c.writer(topic, fullName, id)
		if err != nil {
			return nil, nil, err
		}
		return sc, b[confluentHead:], nil
	default:
		return nil, nil, decodeErr(CheckFirstByte, ErrUnknownFraming, "byte 0 is 0x%02X, want 0x00 (Confluent) or 0xC3 (single-object)", b[0])
	}
}

// writer returns the writer schema registered under id.
func (c *Codec) writer(topic, fullName string, id int) (*schemaCodec, error) {
	c.mu.RLock()
	sc, ok := c.writers[id]
	c.mu.RUnlock()
	if ok {
		return sc, nil
	}
	subject := ""
	if topic != "" {
		subject = Subject(topic, fullName)
	}
	info, err := c.registry.SchemaByID(context.Background(), subject, id)
	if err != nil {
		return nil, &DecodeError{Check: CheckSchemaID, Err: errors.Join(ErrUnknownSchema, err),
			Detail: fmt.Sprintf("schema id %d (subject %q) not found in the registry: %v", id, subject, err)}
	}
	sc, err = compile(info.Schema)
	if err != nil {
		return nil, &DecodeError{Check: CheckSchemaID, Err: errors.Join(ErrUnknownSchema, err),
			Detail: fmt.Sprintf("schema id %d does not compile: %v", id, err)}
	}
	if sc.fingerprint == c.builtin.event.fingerprint {
		sc = c.builtin.event
	} else if sc.fingerprint == c.builtin.key.fingerprint {
		sc = c.builtin.key
	}
	c.mu.Lock()
	c.writers[id] = sc
	c.mu.Unlock()
	return sc, nil
}
