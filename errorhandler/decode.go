package errorhandler

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Decoder turns the raw bytes of a record's key or value into a T.
type Decoder[T any] interface {
	// Decode decodes data read from topic. It is not called for a nil value (a tombstone) or a
	// nil key.
	Decode(topic string, data []byte) (T, error)
}

// DecoderFunc adapts a function to a Decoder.
type DecoderFunc[T any] func(topic string, data []byte) (T, error)

// Decode calls f.
func (f DecoderFunc[T]) Decode(topic string, data []byte) (T, error) { return f(topic, data) }

// JSON returns a Decoder that unmarshals JSON into a T.
func JSON[T any]() Decoder[T] {
	return DecoderFunc[T](func(_ string, data []byte) (T, error) {
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return v, fmt.Errorf("decode json: %w", err)
		}
		return v, nil
	})
}

// Bytes returns a Decoder that hands the raw bytes through unchanged.
func Bytes() Decoder[[]byte] {
	return DecoderFunc[[]byte](func(_ string, data []byte) ([]byte, error) { return data, nil })
}

// Part names which part of a record failed to decode.
type Part string

// The two decoded parts of a record.
const (
	PartKey   Part = "key"
	PartValue Part = "value"
)

// DecodeError describes a record whose key or value could not be decoded. It is what the
// decode hook receives and what the MPFE of a decode failure reports.
type DecodeError struct {
	// Part is the part that failed: key or value.
	Part Part
	// Topic, Partition and Offset locate the record.
	Topic     string
	Partition int32
	Offset    int64
	// Data is the raw bytes of the part. Do not modify them.
	Data []byte
	// Err is the decoder's error.
	Err error
}

// Error returns "decode <part> of <topic>[<partition>]@<offset>: <cause>".
func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode %s of %s[%d]@%d: %v", e.Part, e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns the decoder's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// ErrKeySubstitution is the error of a decode hook that tried to substitute a key: a record
// keeps its own key, so the substitution is refused and the decode policy applies.
var ErrKeySubstitution = errors.New("decode hook substituted a key: refused, a record keeps its own key")

// ErrSubstitutionType is the error of a decode hook that substituted a value of the wrong type;
// the substitution is refused and the decode policy applies.
var ErrSubstitutionType = errors.New("decode hook substituted a value of the wrong type")

type decisionKind uint8

const (
	decideRaise decisionKind = iota
	decideSkip
	decideSubstitute
)

// Decision is a decode hook's answer; build it with Raise, SkipRecord or Substitute.
// The zero Decision is Raise.
type Decision struct {
	kind  decisionKind
	value any
}

// Raise lets the decode policy handle the failure.
func Raise() Decision { return Decision{kind: decideRaise} }

// SkipRecord drops the record: its offset is stored and the skip is counted.
func SkipRecord() Decision { return Decision{kind: decideSkip} }

// Substitute hands v to the handler in place of the undecodable value. v must be of the
// runner's value type (nil means its zero value). Substituting a key is refused with
// ErrKeySubstitution.
func Substitute(v any) Decision { return Decision{kind: decideSubstitute, value: v} }

// DecodeHook is called for every decode failure, before the decode policy. Whatever it decides,
// the failure is counted.
type DecodeHook func(err *DecodeError) Decision

// Skips reports whether d drops the record.
func (d Decision) Skips() bool { return d.kind == decideSkip }

// Substitutes returns the substituted value and true when d substitutes one.
func (d Decision) Substitutes() (any, bool) { return d.value, d.kind == decideSubstitute }
