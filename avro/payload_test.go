package avro_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/linkedin/goavro/v2"

	"github.com/redrive/redrive/avro"
)

const orderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`

func orderDatum(t *testing.T) []byte {
	t.Helper()
	codec, err := goavro.NewCodec(orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	datum, err := codec.BinaryFromNative(nil, map[string]any{"id": int64(7), "note": goavro.Union("string", "rush")})
	if err != nil {
		t.Fatal(err)
	}
	return datum
}

func confluentFramed(id int, datum []byte) []byte {
	b := append([]byte{0, 0, 0, 0, 0}, datum...)
	binary.BigEndian.PutUint32(b[1:5], uint32(id))
	return b
}

func TestPayloadDecoderBothFramings(t *testing.T) {
	t.Parallel()
	reg := newScopedRegistry()
	ctx := context.Background()
	// One schema under the topic's TopicNameStrategy subject, one under a subject only the
	// registry's reverse lookup finds.
	byTopic, err := reg.Register(ctx, "orders-value", orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(orderSchema, `"Order"`, `"Refund"`, 1)
	byRecord, err := reg.Register(ctx, "payments-shop.Refund", other)
	if err != nil {
		t.Fatal(err)
	}
	d, err := avro.NewPayloadDecoder(avro.PayloadDecoderConfig{Registry: reg, Schemas: []string{orderSchema}})
	if err != nil {
		t.Fatal(err)
	}
	datum := orderDatum(t)
	const want = `{"id":7,"note":{"string":"rush"}}`
	check := func(name string, got *avro.DecodedPayload, err error, framing string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var a, b any
		_ = json.Unmarshal(got.JSON, &a)
		_ = json.Unmarshal([]byte(want), &b)
		if got.Framing != framing || !jsonEqual(a, b) {
			t.Errorf("%s = %s %s, want %s %s", name, got.Framing, got.JSON, framing, want)
		}
	}
	got, err := d.Decode("orders", "value", confluentFramed(byTopic, datum))
	check("confluent by topic subject", got, err, avro.FramingConfluent)
	if got.SchemaID != byTopic || !strings.Contains(got.Describe(), "schema id") {
		t.Errorf("schema id %d, describe %q", got.SchemaID, got.Describe())
	}
	got, err = d.Decode("elsewhere", "value", confluentFramed(byRecord, datum))
	check("confluent by reverse lookup", got, err, avro.FramingConfluent)
	if got.Subject != "payments-shop.Refund" {
		t.Errorf("subject = %q", got.Subject)
	}

	sc, err := avro.CompileSchema(orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	fp := sc.Fingerprint()
	single := append(append([]byte{0xc3, 0x01}, fp[:]...), datum...)
	got, err = d.Decode("orders", "value", single)
	check("single-object", got, err, avro.FramingSingleObject)

	// The contract's own event decodes without configuration.
	ev, err := avro.NewCodec(avro.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &avro.Event{DomainEventVersion: avro.DomainEventVersion,
		Type:       avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion},
		References: avro.References{ErrorType: avro.ErrorTypeReference{Temporality: avro.Permanent}}}
	b, err := ev.EncodeEvent("errors", e)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.Decode("errors", "value", b); err != nil || got.Framing != avro.FramingSingleObject {
		t.Errorf("event = %v, %v", got, err)
	}
}

func TestPayloadDecoderErrors(t *testing.T) {
	t.Parallel()
	datum := orderDatum(t)
	noReg, err := avro.NewPayloadDecoder(avro.PayloadDecoderConfig{MaxBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	reg := newScopedRegistry()
	id, err := reg.Register(context.Background(), "orders-value", orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	withReg, err := avro.NewPayloadDecoder(avro.PayloadDecoderConfig{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		d    *avro.PayloadDecoder
		b    []byte
		want error
	}{
		{"json", noReg, []byte(`{"id":7}`), avro.ErrUnknownFraming},
		{"empty", noReg, nil, avro.ErrUnknownFraming},
		{"too large", noReg, make([]byte, 65), avro.ErrTooLarge},
		{"no registry", noReg, confluentFramed(1, datum), avro.ErrNoRegistry},
		{"unknown fingerprint", noReg, append([]byte{0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, datum...), avro.ErrUnknownSchema},
		{"unknown id", withReg, confluentFramed(id+1000, datum), avro.ErrUnknownSchema},
		{"trailing bytes", withReg, append(confluentFramed(id, datum), 1), avro.ErrInvalidDatum},
		{"truncated", withReg, confluentFramed(id, datum[:1]), avro.ErrInvalidDatum},
		{"hostile count", withReg, confluentFramed(id, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}), avro.ErrInvalidDatum},
	} {
		_, err := c.d.Decode("orders", "value", c.b)
		var pe *avro.PayloadError
		if !errors.Is(err, c.want) || !errors.As(err, &pe) || !strings.Contains(pe.Error(), "value") {
			t.Errorf("%s: %v, want %v naming the part", c.name, err, c.want)
		}
	}
	if _, err := avro.NewPayloadDecoder(avro.PayloadDecoderConfig{Schemas: []string{`{"type":"nope"}`}}); err == nil || !strings.Contains(err.Error(), "Schemas[0]") {
		t.Errorf("bad schema = %v", err)
	}
}

func FuzzPayloadDecoder(f *testing.F) {
	sc, err := avro.CompileSchema(orderSchema)
	if err != nil {
		f.Fatal(err)
	}
	fp := sc.Fingerprint()
	f.Add(append(append([]byte{0xc3, 0x01}, fp[:]...), 0x0e, 0x02, 0x08, 'r', 'u', 's', 'h'))
	f.Add([]byte{0xc3, 0x01})
	f.Add([]byte{0, 0, 0, 0, 1, 2})
	d, err := avro.NewPayloadDecoder(avro.PayloadDecoderConfig{Schemas: []string{orderSchema}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := d.Decode("t", "value", b)
		if err == nil && !json.Valid(got.JSON) {
			t.Fatalf("decoded to invalid JSON %q", got.JSON)
		}
		var pe *avro.PayloadError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("error %T %v is not a *PayloadError", err, err)
		}
	})
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
