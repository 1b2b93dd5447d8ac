package payload_test

import (
	"errors"
	"testing"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
)

// FuzzDecode feeds hostile bytes to every decoder: Protobuf (any schema id the fuzzer picks
// resolves to one of the registered ones or none), JSON Schema, Avro and plain JSON. It never
// panics, and every error is an *avro.PayloadError; what decodes re-encodes.
func FuzzDecode(f *testing.F) {
	reg := payloadtest.Registry(f)
	proto := payloadtest.Protobuf(f, reg, "orders", "shop.Order", orderJSON)
	nested := payloadtest.Protobuf(f, reg, "orders", "shop.Order.Customer", `{"name":"x"}`)
	js := payloadtest.JSONSchema(f, reg, "orders-json", payloadtest.Order{ID: "1"})
	for _, s := range [][]byte{proto, nested, js, []byte(`{"a":1}`), {0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 0, 0, 1, 0x80}} {
		f.Add(s)
	}
	d, err := payload.New(payload.Config{Registry: reg, MaxBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := d.Decode("orders", "value", b)
		if err != nil {
			var pe *avro.PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *avro.PayloadError", err, err)
			}
			return
		}
		if got.Format == payload.FormatJSON {
			return
		}
		if _, err := d.Encode("orders", "value", got.Format, b, got.JSON); err != nil && got.Format != payload.FormatJSONSchema {
			var pe *avro.PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("re-encode error %T %v", err, err)
			}
		}
	})
}
