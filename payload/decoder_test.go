package payload_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
)

const orderJSON = `{"id":"o-1","customer":{"name":"Ada","email":"ada@example.com"},` +
	`"total":{"currency":"CHF","units":"1250"},"placedAt":"2026-03-01T12:30:00.250Z",` +
	`"lines":[{"sku":"A-1","quantity":2},{"sku":"B-7","quantity":1}],"quantity":3}`

func newDecoder(t *testing.T, reg avro.Registry) *payload.Decoder {
	t.Helper()
	d, err := payload.New(payload.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// protojsonOf is the oracle: the message as protojson renders it, compact.
func protojsonOf(t *testing.T, name, js string) string {
	t.Helper()
	b, err := protojson.Marshal(payloadtest.Message(t, name, js))
	if err != nil {
		t.Fatal(err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatal(err)
	}
	return c.String()
}

func TestProtobufFromTheRegistrysSerializer(t *testing.T) {
	t.Parallel()
	reg := payloadtest.Registry(t)
	d := newDecoder(t, reg)
	for _, tc := range []struct {
		name, js string
		indexes  []int
	}{
		{"shop.Order", orderJSON, []int{0}},
		{"shop.Order.Customer", `{"name":"Bob","email":"bob@example.com"}`, []int{0, 0}},
		{"shop.Line", `{"sku":"C-3","quantity":-4}`, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := payloadtest.Protobuf(t, reg, "orders", tc.name, tc.js)
			got, err := d.Decode("orders", "value", b)
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != payload.FormatProtobuf || got.MessageType != tc.name || !equalInts(got.MessageIndexes, tc.indexes) {
				t.Errorf("format %s, type %s, indexes %v; want protobuf, %s, %v", got.Format, got.MessageType, got.MessageIndexes, tc.name, tc.indexes)
			}
			if want := protojsonOf(t, tc.name, tc.js); string(got.JSON) != want {
				t.Errorf("JSON\n got %s\nwant %s", got.JSON, want)
			}
			if got.SchemaID != int(binary.BigEndian.Uint32(b[1:5])) || got.Note != "" {
				t.Errorf("schema id %d, note %q", got.SchemaID, got.Note)
			}
			// The import is a reference of its own, as the serializer registered it.
			info, err := reg.SchemaByID(context.Background(), "orders-value", got.SchemaID)
			if err != nil || len(info.References) != 1 || info.References[0].Name != payloadtest.MoneyFile {
				t.Errorf("registered schema's references %+v, %v", info.References, err)
			}
			// Re-encoding the decoded JSON gives the serializer's bytes exactly.
			again, err := d.Encode("orders", "value", payload.FormatProtobuf, b, got.JSON)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, b) {
				t.Errorf("re-encoded\n got %x\nwant %x", again, b)
			}
		})
	}
}

func TestProtobufWellKnownTypesPerProtojson(t *testing.T) {
	t.Parallel()
	reg := payloadtest.Registry(t)
	got, err := newDecoder(t, reg).Decode("orders", "value", payloadtest.Protobuf(t, reg, "orders", "shop.Order", orderJSON))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"placedAt":"2026-03-01T12:30:00.250Z"`, `"units":"1250"`, `"email":"ada@example.com"`} {
		if !strings.Contains(string(got.JSON), want) {
			t.Errorf("%s lacks %s", got.JSON, want)
		}
	}
}

func TestProtobufRepairEditsAndRefusals(t *testing.T) {
	t.Parallel()
	reg := payloadtest.Registry(t)
	d := newDecoder(t, reg)
	b := payloadtest.Protobuf(t, reg, "orders", "shop.Order.Customer", `{"name":"Bob","email":"bob@example.com"}`)
	edited, err := d.Encode("orders", "value", payload.FormatProtobuf, b, []byte(`{"name":"Bob","email":"bob@example.org"}`))
	if err != nil {
		t.Fatal(err)
	}
	// The serializer marshals a dynamic message with proto.Marshal, whose field order is not
	// fixed (it may write email before name); the edit writes fields in number order. So:
	// the serializer's framing, byte for byte, and its message written in number order.
	want := payloadtest.Protobuf(t, reg, "orders", "shop.Order.Customer", `{"name":"Bob","email":"bob@example.org"}`)
	const framing = 8 // magic, schema id, the index list [0, 0] (count 2, then 0 and 0)
	wantMsg, err := proto.MarshalOptions{Deterministic: true}.Marshal(payloadtest.Decode(t, "shop.Order.Customer", want[framing:]))
	if err != nil {
		t.Fatal(err)
	}
	if len(edited) < framing || !bytes.Equal(edited[:framing], want[:framing]) || !bytes.Equal(edited[framing:], wantMsg) {
		t.Errorf("edited\n got %x\nwant %x then %x (the serializer's framing, its message in number order)", edited, want[:framing], wantMsg)
	}
	if !bytes.Equal(edited[:7], b[:7]) { // magic, id, indexes [0, 0] as 2 varints after the count
		t.Errorf("framing changed: %x vs %x", edited[:7], b[:7])
	}
	// A larger edit: the same framing, the serializer's message (its fields may come in
	// another order: compare the messages).
	o := payloadtest.Protobuf(t, reg, "orders", "shop.Order", orderJSON)
	changed := strings.Replace(orderJSON, `"quantity":3`, `"quantity":4`, 1)
	edited, err = d.Encode("orders", "value", payload.FormatProtobuf, o, []byte(changed))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(edited[:6], o[:6]) || protojsonOf(t, "shop.Order", changed) != compactJSON(t, payloadtest.Decode(t, "shop.Order", edited[6:])) {
		t.Errorf("edited order %x", edited)
	}
	for _, tc := range []struct{ edit, field string }{
		{`{"name":"Bob","phone":"1"}`, "phone"},
		{`{"name":7}`, "name"},
		{`{"name":"Bob"`, "unexpected"},
	} {
		_, err := d.Encode("orders", "value", payload.FormatProtobuf, b, []byte(tc.edit))
		var pe *avro.PayloadError
		if !errors.As(err, &pe) || !errors.Is(err, avro.ErrInvalidDatum) || !strings.Contains(pe.Detail, tc.field) {
			t.Errorf("edit %s: %v, want an invalid datum naming %s", tc.edit, err, tc.field)
		}
	}
	if _, err := d.Encode("orders", "value", payload.FormatAvro, b, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "is Protobuf, not Avro") {
		t.Errorf("Avro edit of a Protobuf payload: %v", err)
	}
}

func TestJSONSchemaFromTheRegistrysSerializer(t *testing.T) {
	t.Parallel()
	reg := payloadtest.Registry(t)
	d := newDecoder(t, reg)
	b := payloadtest.JSONSchema(t, reg, "orders-json", payloadtest.Order{ID: "o-2", Customer: payloadtest.Customer{Name: "Eve", Email: "eve@example.com"}, Quantity: 2})
	got, err := d.Decode("orders-json", "value", b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != payload.FormatJSONSchema || string(got.JSON) != string(b[5:]) || got.Validation == nil || !got.Validation.Valid {
		t.Fatalf("decoded %+v (validation %+v)", got, got.Validation)
	}
	again, err := d.Encode("orders-json", "value", payload.FormatJSONSchema, b, []byte("{\n  \"id\": \"o-2\", \"customer\": {\"name\": \"Eve\", \"email\": \"eve@example.com\"}, \"quantity\": 2}"))
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("re-encoded %q, %v; want %q", again, err, b)
	}
	// A document that does not validate is shown, with the reason.
	bad := append(append([]byte(nil), b[:5]...), `{"id":"o-3","customer":{"name":"Eve"},"quantity":"two"}`...)
	got, err = d.Decode("orders-json", "value", bad)
	if err != nil {
		t.Fatal(err)
	}
	if got.Validation.Valid || !strings.Contains(strings.Join(got.Validation.Errors, "\n"), "/quantity") {
		t.Errorf("validation %+v", got.Validation)
	}
	// A repair must validate; the refusal names where.
	_, err = d.Encode("orders-json", "value", payload.FormatJSONSchema, b, bad[5:])
	if err == nil || !strings.Contains(err.Error(), "/quantity") {
		t.Errorf("invalid edit: %v", err)
	}
}

func TestPlainJSONAndAvroThroughTheOneDecoder(t *testing.T) {
	t.Parallel()
	d := newDecoder(t, nil)
	got, err := d.Decode("t", "value", []byte(`{ "a": [1, 2] }`))
	if err != nil || got.Format != payload.FormatJSON || string(got.JSON) != `{"a":[1,2]}` {
		t.Errorf("plain JSON: %+v, %v", got, err)
	}
	if _, err := d.Decode("t", "value", []byte{0, 0, 0, 0, 7, 1}); !errors.Is(err, avro.ErrNoRegistry) {
		t.Errorf("framed without a registry: %v", err)
	}
	if _, err := d.Decode("t", "value", []byte("plain text")); !errors.Is(err, avro.ErrUnknownFraming) {
		t.Errorf("text: %v", err)
	}
}

func TestUnknownIndexesAndTruncatedMessages(t *testing.T) {
	t.Parallel()
	reg := payloadtest.Registry(t)
	d := newDecoder(t, reg)
	b := payloadtest.Protobuf(t, reg, "orders", "shop.Line", `{"sku":"C-3","quantity":4}`)
	for name, bad := range map[string][]byte{
		"index out of range": append(append(append([]byte(nil), b[:5]...), 2, 10), b[7:]...),
		"truncated message":  b[:len(b)-1],
		"huge index count":   append(append([]byte(nil), b[:5]...), 0xfe, 0xff, 0xff, 0xff, 0x0f),
		"no indexes":         b[:5],
	} {
		_, err := d.Decode("orders", "value", bad)
		var pe *avro.PayloadError
		if !errors.As(err, &pe) || !errors.Is(err, avro.ErrInvalidDatum) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func compactJSON(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatal(err)
	}
	return c.String()
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
