// Package payloadtest makes payloads the way a schema registry's own serializers do, for
// tests: Protobuf (with an import and a nested message) with confluent-kafka-go's serde/protobuf,
// and JSON Schema with its serde/jsonschema, against the registry client's in-memory mock.
// It is for tests only: it links confluent-kafka-go (and so cgo).
package payloadtest

import (
	"context"
	"embed"
	"io"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/jsonschema"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/protobuf"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/redrive/redrive/avro/confluentsr"
)

//go:embed orders.proto common/money.proto
var protos embed.FS

// Proto files: orders.proto (package shop: Order, with the nested Order.Customer, and Line)
// imports common/money.proto (shop.common.Money) and google/protobuf/timestamp.proto.
const (
	OrdersFile = "orders.proto"
	MoneyFile  = "common/money.proto"
)

// Registry returns a fresh in-memory mock registry named for t.
func Registry(t testing.TB) *confluentsr.Registry {
	t.Helper()
	r, err := confluentsr.Dial("mock://"+t.Name(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Files returns the compiled descriptor of orders.proto.
func Files(t testing.TB) linker.File {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) { return protos.Open(path) },
	})}
	files, err := c.Compile(context.Background(), OrdersFile)
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}

// Message returns a message of type name (e.g. "shop.Order", "shop.Order.Customer") of
// orders.proto, filled from its protojson form js.
func Message(t testing.TB, name, js string) *dynamicpb.Message {
	t.Helper()
	fd := Files(t)
	d := fd.FindDescriptorByName(protoreflect.FullName(name))
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		t.Fatalf("no message %s", name)
	}
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatalf("%s from %s: %v", name, js, err)
	}
	return m
}

// Decode decodes b, a bare message of type name of orders.proto.
func Decode(t testing.TB, name string, b []byte) *dynamicpb.Message {
	t.Helper()
	m := Message(t, name, "{}")
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return m
}

// Protobuf serializes the message of type name given as protojson js, as a value of topic,
// with the registry's own Protobuf serializer (which registers orders.proto under
// topic-value and common/money.proto under its own name as a reference).
func Protobuf(t testing.TB, reg *confluentsr.Registry, topic, name, js string) []byte {
	t.Helper()
	s, err := protobuf.NewSerializer(reg.Client(), serde.ValueSerde, protobuf.NewSerializerConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Serialize(topic, Message(t, name, js))
	if err != nil {
		t.Fatalf("serialize %s: %v", name, err)
	}
	return b
}

// JSONSchema serializes v as a value of topic with the registry's own JSON Schema serializer,
// which derives the schema from v's Go type and registers it under topic-value.
func JSONSchema(t testing.TB, reg *confluentsr.Registry, topic string, v any) []byte {
	t.Helper()
	s, err := jsonschema.NewSerializer(reg.Client(), serde.ValueSerde, jsonschema.NewSerializerConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Serialize(topic, v)
	if err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return b
}

// Customer is the customer of a JSON Schema order.
type Customer struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// Order is a JSON Schema order: the registry's serializer derives its schema (every member
// required, no others allowed).
type Order struct {
	ID       string   `json:"id"`
	Customer Customer `json:"customer"`
	Quantity int      `json:"quantity"`
}
