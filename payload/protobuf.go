package payload

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/redrive/redrive/avro"
)

// protoSchema is a compiled Protobuf schema: its file and the resolver of every type it can
// reach (its imports and the well-known types), for Any values.
type protoSchema struct {
	file     protoreflect.FileDescriptor
	resolver linker.Resolver
}

// maxMessageIndexes bounds the message-index list of a Protobuf payload (the depth of a
// nested message type).
const maxMessageIndexes = 100

// rootFile is the name under which a registry schema is compiled; its references keep the
// names it imports them by.
func rootFile(id int) string { return fmt.Sprintf("registry/schema-%d.proto", id) }

// compileProto compiles the Protobuf schema text info (with id) and the schemas it references.
// Imports that the registry does not serve resolve to the well-known types that protocompile
// carries (google/protobuf/*.proto).
func compileProto(ctx context.Context, reg avro.Registry, id int, info avro.RegistrySchema) (*protoSchema, error) {
	refs, err := references(ctx, reg, info)
	if err != nil {
		return nil, err
	}
	srcs := map[string]string{rootFile(id): info.Schema}
	for name, s := range refs {
		if name == rootFile(id) {
			return nil, fmt.Errorf("a reference is named %q", name)
		}
		srcs[name] = s.Schema
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: func(path string) (io.ReadCloser, error) {
				s, ok := srcs[path]
				if !ok {
					return nil, fmt.Errorf("import %q is neither a reference of the schema nor a well-known type", path)
				}
				return io.NopCloser(strings.NewReader(s)), nil
			},
		}),
	}
	files, err := c.Compile(ctx, rootFile(id))
	if err != nil {
		return nil, err
	}
	return &protoSchema{file: files[0], resolver: files.AsResolver()}, nil
}

// readMessageIndexes reads the message-index list at the start of b (after the schema id) and
// returns it and its length in bytes.
func readMessageIndexes(b []byte) ([]int, int, error) {
	n, read := binary.Varint(b)
	switch {
	case read <= 0:
		return nil, 0, errors.New("the message-index list after the schema id is truncated")
	case n < 0 || n > maxMessageIndexes:
		return nil, 0, fmt.Errorf("the message-index list claims %d indexes", n)
	case n == 0:
		return []int{0}, read, nil
	}
	out := make([]int, n)
	for i := range out {
		v, r := binary.Varint(b[read:])
		if r <= 0 {
			return nil, 0, errors.New("the message-index list after the schema id is truncated")
		}
		if v < 0 || v > 1<<20 {
			return nil, 0, fmt.Errorf("message index %d is out of range", v)
		}
		out[i], read = int(v), read+r
	}
	return out, read, nil
}

// message returns the message type that indexes name in the schema.
func (s *protoSchema) message(indexes []int) (protoreflect.MessageDescriptor, error) {
	var md protoreflect.MessageDescriptor
	for i, ix := range indexes {
		var msgs protoreflect.MessageDescriptors
		if i == 0 {
			msgs = s.file.Messages()
		} else {
			msgs = md.Messages()
		}
		if ix >= msgs.Len() {
			return nil, fmt.Errorf("message indexes %v name no message type of the schema (index %d of %d)", indexes, ix, msgs.Len())
		}
		md = msgs.Get(ix)
	}
	if md == nil {
		return nil, errors.New("the schema declares no message type")
	}
	return md, nil
}

// decode decodes b (the whole framed payload) into out.
func (s *protoSchema) decode(part string, b []byte, out *Decoded) (*Decoded, error) {
	bad := func(format string, args ...any) error {
		return &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrInvalidDatum,
			Detail: fmt.Sprintf("the %s is a Protobuf payload with schema id %d, but ", part, out.SchemaID) + fmt.Sprintf(format, args...)}
	}
	indexes, n, err := readMessageIndexes(b[5:])
	if err != nil {
		return nil, bad("%v", err)
	}
	md, err := s.message(indexes)
	if err != nil {
		return nil, bad("%v", err)
	}
	out.MessageType, out.MessageIndexes = string(md.FullName()), indexes
	m := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{Resolver: s.resolver}).Unmarshal(b[5+n:], m); err != nil {
		return nil, bad("the message does not decode as %s: %v", md.FullName(), err)
	}
	js, err := protojson.MarshalOptions{Resolver: s.resolver}.Marshal(m)
	if err != nil {
		return nil, bad("the message does not render as JSON: %v", err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, js); err != nil { // protojson varies its spacing on purpose
		return nil, bad("the message does not render as JSON: %v", err)
	}
	out.JSON = c.Bytes()
	if u := unknownBytes(m.ProtoReflect(), 0); u > 0 {
		out.Note = fmt.Sprintf("%d bytes of the message are fields its schema does not declare: the JSON does not show them, and a repair would drop them", u)
	}
	return out, nil
}

// unknownBytes counts the bytes of fields that m and the messages in it do not declare.
func unknownBytes(m protoreflect.Message, depth int) int {
	if depth > 100 {
		return 0
	}
	n := len(m.GetUnknown())
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					n += unknownBytes(mv.Message(), depth+1)
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					n += unknownBytes(l.Get(i).Message(), depth+1)
				}
			}
		case fd.Message() != nil:
			n += unknownBytes(v.Message(), depth+1)
		}
		return true
	})
	return n
}

// encode encodes edited (protojson) as the message type of like, framed as like is.
func (s *protoSchema) encode(part string, like, edited []byte) ([]byte, error) {
	indexes, n, err := readMessageIndexes(like[5:])
	if err == nil {
		var md protoreflect.MessageDescriptor
		if md, err = s.message(indexes); err == nil {
			m := dynamicpb.NewMessage(md)
			if err = (protojson.UnmarshalOptions{Resolver: s.resolver}).Unmarshal(edited, m); err != nil {
				return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrInvalidDatum,
					Detail: fmt.Sprintf("the edited %s does not fit its writer schema (Protobuf message %s): %s", part, md.FullName(), protoReason(err))}
			}
			// An edit that changes nothing keeps the original bytes (a writer may order its
			// fields otherwise than by number); one that changes something is written with the
			// fields in number order, as generated code writes them.
			orig := dynamicpb.NewMessage(md)
			if (proto.UnmarshalOptions{Resolver: s.resolver}).Unmarshal(like[5+n:], orig) == nil && proto.Equal(orig, m) {
				return append([]byte(nil), like...), nil
			}
			out := append([]byte(nil), like[:5+n]...)
			out, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(out, m)
			if err != nil {
				return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrInvalidDatum,
					Detail: fmt.Sprintf("the edited %s does not encode as Protobuf message %s: %v", part, md.FullName(), err)}
			}
			return out, nil
		}
	}
	return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrInvalidDatum,
		Detail: fmt.Sprintf("the original %s's Protobuf framing does not decode: %v", part, err)}
}

// protoReason is protojson's error without its "proto:" prefix; it names the field and where
// it is, e.g. `(line 1:12): invalid value for int32 field quantity: "x"`.
func protoReason(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "proto:")
	return strings.TrimSpace(strings.ReplaceAll(s, "\u00a0", " "))
}
