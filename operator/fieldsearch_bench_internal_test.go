package operator

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
)

// BenchmarkFieldMatch measures one candidate of a decoded field search (decoded with the
// registry's schema, masked, matched), side by side with the substring match a raw payload
// search makes of the same bytes: candidates/s is what one request decodes per second.
func BenchmarkFieldMatch(b *testing.B) {
	reg := payloadtest.Registry(b)
	avroID, err := reg.Client().Register("av-value", schemaregistry.SchemaInfo{Schema: `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"id","type":"string"},{"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"email","type":"string"}]}}]}`}, false)
	if err != nil {
		b.Fatal(err)
	}
	d, err := payload.New(payload.Config{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	rules, err := masking.Parse(strings.NewReader("masked json /customer/name\n"), "bench")
	if err != nil {
		b.Fatal(err)
	}
	c := &Core{cfg: Config{Payloads: d, Masking: rules}}
	order := `{"id":"o-1","customer":{"name":"Ada","email":"ada@example.com"},"total":{"currency":"CHF","units":"1250"},` +
		`"placedAt":"2026-03-01T12:30:00.250Z","lines":[{"sku":"A-1","quantity":2},{"sku":"B-2","quantity":1}],"quantity":3}`
	avroStr := func(s string) []byte { return append(binary.AppendVarint(nil, int64(len(s))), s...) }
	framed := binary.BigEndian.AppendUint32([]byte{0}, uint32(avroID))
	framed = append(append(framed, avroStr("o-1")...), avroStr("ada@example.com")...)
	values := []struct {
		name, topic string
		value       []byte
	}{
		{"protobuf", "pb", payloadtest.Protobuf(b, reg, "pb", "shop.Order", order)},
		{"protobuf-masked", "masked", payloadtest.Protobuf(b, reg, "masked", "shop.Order", order)},
		{"jsonschema", "js", payloadtest.JSONSchema(b, reg, "js", payloadtest.Order{ID: "o-2",
			Customer: payloadtest.Customer{Name: "Ada", Email: "ada@example.com"}, Quantity: 2})},
		{"avro", "av", framed},
		{"json", "plain", []byte(order)},
	}
	m := &redrive.PayloadFieldMatch{Pointer: []string{"customer", "email"}, Value: "ada@example.com"}
	for _, v := range values {
		f := &redrive.FailureSummary{Topic: v.topic}
		if ok, _ := c.fieldMatches(m, f, v.value); !ok {
			b.Fatalf("%s: no match", v.name)
		}
		b.Run(v.name+"/decoded", func(b *testing.B) {
			for b.Loop() {
				c.fieldMatches(m, f, v.value)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "candidates/s")
		})
		b.Run(v.name+"/raw", func(b *testing.B) {
			needle := []byte("ada@example.com")
			for b.Loop() {
				bytes.Contains(v.value, needle)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "candidates/s")
		})
	}
}
