package operator_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
)

// A repair form starts from the stored original of each part the reader sees as stored, and
// from nothing of a part hidden or masked for them.
func TestRepairStart(t *testing.T) {
	t.Parallel()
	reg, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://operator-repair-start"))
	if err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"record","name":"Card","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"pan","type":"string"}]}`
	schemaID, err := reg.Register("cards-value", schemaregistry.SchemaInfo{Schema: schema}, false)
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := payload.New(payload.Config{Registry: confluentsr.New(reg)})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := masking.Parse(strings.NewReader("secrets json /ssn\nsecrets header authorization\ncards.masked json /pan"), "test")
	if err != nil {
		t.Fatal(err)
	}
	c, s := newCore(t, func(cfg *operator.Config) { cfg.Masking, cfg.Payloads = rules, payloads })
	pool := s.Pool()
	// An Avro datum {"id": 7, "pan": "4111"} in the Confluent framing.
	framed := append([]byte{0, 0, 0, 0, 0, 0x0e, 0x08}, "4111"...)
	binary.BigEndian.PutUint32(framed[1:5], uint32(schemaID))
	cr := confluentsr.New(reg)
	proto := payloadtest.Protobuf(t, cr, "pb", "shop.Line", `{"sku":"A-1","quantity":2}`)
	js := payloadtest.JSONSchema(t, cr, "js", payloadtest.Order{ID: "o-1", Quantity: 2})
	hdr := func(auth string) testkit.FailureRow {
		return testkit.FailureRow{HeaderNames: []string{"authorization", "trace"}, HeaderValues: [][]byte{[]byte(auth), []byte("t-1")}}
	}
	with := func(r testkit.FailureRow, topic string, value []byte) testkit.FailureRow {
		r.Topic, r.Value = topic, value
		return r
	}
	for _, tc := range []struct {
		name                 string
		row                  testkit.FailureRow
		reader               operator.Reader
		value, format        string
		valueWithheld        string
		headers, headersKept bool
	}{
		{"plain JSON", with(hdr("Bearer x"), "orders", []byte(`{"a":1}`)), admin, "{\n  \"a\": 1\n}", operator.EditJSON, "", true, false},
		{"text", with(hdr("Bearer x"), "orders", []byte("plain")), admin, "plain", operator.EditText, "", true, false},
		{"binary", with(hdr("Bearer x"), "orders", []byte{0xff, 0x00}), admin, "", "", "", true, false},
		{"masked member and header", with(hdr("Bearer x"), "secrets", []byte(`{"ssn":"123"}`)), admin, "", "", operator.WithheldValueMasked, false, true},
		{"hidden payload", with(hdr("Bearer x"), "orders", []byte(`{"a":1}`)), operator.Reader{Principal: "nina"}, "", "", operator.HiddenReason, false, true},
		{"Avro", with(hdr("Bearer x"), "cards", framed), admin, "{\n  \"id\": 7,\n  \"pan\": \"4111\"\n}", operator.EditAvro, "", true, false},
		{"masked Avro member", with(hdr("Bearer x"), "cards.masked", framed), admin, "", "", operator.WithheldValueMasked, true, false},
		{"Protobuf", with(hdr("Bearer x"), "pb", proto), admin, "{\n  \"sku\": \"A-1\",\n  \"quantity\": 2\n}", operator.EditProtobuf, "", true, false},
		{"masked Protobuf", with(hdr("Bearer x"), "cards.masked", proto), admin, "", "", operator.WithheldValueMasked, true, false},
		{"JSON Schema", with(hdr("Bearer x"), "js", js), admin,
			"{\n  \"id\": \"o-1\",\n  \"customer\": {\n    \"name\": \"\",\n    \"email\": \"\"\n  },\n  \"quantity\": 2\n}", operator.EditJSONSchema, "", true, false},
		{"Protobuf without the payload permission", with(hdr("Bearer x"), "pb", proto), operator.Reader{Principal: "nina"}, "", "", operator.HiddenReason, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := testkit.InsertFailure(t, pool, tc.row)
			v, err := c.Failure(context.Background(), id, tc.reader)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.RepairStart(context.Background(), v)
			if err != nil {
				t.Fatal(err)
			}
			if string(st.Value) != tc.value || st.Format != tc.format || st.ValueWithheld != tc.valueWithheld {
				t.Errorf("value %q in %q, withheld %q; want %q in %q, withheld %q", st.Value, st.Format, st.ValueWithheld, tc.value, tc.format, tc.valueWithheld)
			}
			if (st.Headers != nil) != tc.headers || (st.HeadersWithheld != "") != tc.headersKept {
				t.Errorf("headers %v (withheld %q)", st.Headers, st.HeadersWithheld)
			}
			if tc.headers && string(st.Headers[0].Value) != "Bearer x" {
				t.Errorf("headers = %v, want the originals", st.Headers)
			}
		})
	}
}
