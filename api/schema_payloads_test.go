package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
)

// Secrets in a masked Protobuf field and a masked JSON Schema field.
const (
	secretProto = "pb-secret-4417@example.com"
	secretJSON  = "js-secret-9021@example.com"
)

const protoOrder = `{"id":"o-1","customer":{"name":"Ada","email":"` + secretProto + `"},` +
	`"total":{"currency":"CHF","units":"1250"},"placedAt":"2026-03-01T12:30:00.250Z",` +
	`"lines":[{"sku":"A-1","quantity":2}],"quantity":3}`

// schemaEnv is an API whose registry (the mock of confluent-kafka-go) serves the writer
// schemas of Protobuf and JSON Schema failures, written by the registry's own serializers.
type schemaEnv struct {
	*env
	// masked ids: topics whose /customer/email is masked; plain: topics without rules.
	protoMasked, jsonMasked, protoPlain, jsonPlain uuid.UUID
	// the stored values
	protoValue, jsonValue []byte
	payloads              *payload.Decoder
}

func newSchemaEnv(t *testing.T) *schemaEnv {
	t.Helper()
	reg := payloadtest.Registry(t)
	payloads, err := payload.New(payload.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := masking.Parse(strings.NewReader("pb-secure json /customer/email\njs-secure json /customer/email\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) {
		s.Core.Payloads, s.Core.Masking = payloads, rules
		tokens, err := auth.ParseTokens("olga:operator:" + noPayloadOperatorToken)
		if err != nil {
			t.Fatal(err)
		}
		s.Auth.Tokens = append(s.Auth.Tokens, tokens...)
	})
	for _, topic := range []string{"pb-secure", "js-secure", "pb-plain", "js-plain"} {
		e.cluster.CreateTopic(t, topic, 1)
	}
	s := &schemaEnv{env: e, payloads: payloads}
	s.protoValue = payloadtest.Protobuf(t, reg, "pb-secure", "shop.Order", protoOrder)
	s.jsonValue = payloadtest.JSONSchema(t, reg, "js-secure", payloadtest.Order{ID: "o-2",
		Customer: payloadtest.Customer{Name: "Eve", Email: secretJSON}, Quantity: 2})
	s.protoMasked = e.insert(row{Topic: "pb-secure", Value: s.protoValue, Causing: "pb-1", Offset: 1})
	s.jsonMasked = e.insert(row{Topic: "js-secure", Value: s.jsonValue, Causing: "js-1", Offset: 2})
	s.protoPlain = e.insert(row{Topic: "pb-plain", Value: payloadtest.Protobuf(t, reg, "pb-plain", "shop.Order", protoOrder), Causing: "pb-2", Offset: 3})
	s.jsonPlain = e.insert(row{Topic: "js-plain", Value: payloadtest.JSONSchema(t, reg, "js-plain", payloadtest.Order{ID: "o-3",
		Customer: payloadtest.Customer{Name: "Eve", Email: secretJSON}, Quantity: 2}), Causing: "js-2", Offset: 4})
	return s
}

type decodedBody struct {
	Format         string         `json:"format"`
	Framing        string         `json:"framing"`
	SchemaID       *int           `json:"schema_id"`
	MessageType    string         `json:"message_type"`
	MessageIndexes []int          `json:"message_indexes"`
	Value          map[string]any `json:"value"`
	Validation     *struct {
		Valid  bool     `json:"valid"`
		Errors []string `json:"errors"`
	} `json:"validation"`
}

func TestSchemaPayloadsDecodedAndMasked(t *testing.T) {
	t.Parallel()
	s := newSchemaEnv(t)
	get := func(id uuid.UUID, token string) (*response, decodedBody) {
		r := s.do("GET", "/api/v1/failures/"+id.String()+"/payload?format=decoded", token, nil)
		var d decodedBody
		if r.status == 200 {
			r.json(t, &d)
		}
		return r, d
	}
	// Unmasked: the decoded document, with what the framing says.
	r, d := get(s.protoPlain, viewerToken)
	cust, _ := d.Value["customer"].(map[string]any)
	if r.status != 200 || d.Format != "protobuf" || d.Framing != "confluent" || d.SchemaID == nil || d.MessageType != "shop.Order" ||
		len(d.MessageIndexes) != 1 || d.MessageIndexes[0] != 0 || cust["email"] != secretProto || d.Value["placedAt"] != "2026-03-01T12:30:00.250Z" {
		t.Errorf("protobuf decoded = %d %+v", r.status, d)
	}
	r, d = get(s.jsonPlain, viewerToken)
	cust, _ = d.Value["customer"].(map[string]any)
	if r.status != 200 || d.Format != "jsonschema" || d.Validation == nil || !d.Validation.Valid || cust["email"] != secretJSON {
		t.Errorf("json schema decoded = %d %+v", r.status, d)
	}
	// format=avro names the format it found.
	if r := s.do("GET", "/api/v1/failures/"+s.protoPlain.String()+"/payload?format=avro", viewerToken, nil); r.status != 422 ||
		!strings.Contains(r.problem(t).Detail, "Protobuf message shop.Order") {
		t.Errorf("format=avro of protobuf = %d %s", r.status, r.body)
	}
	// Masked: the rule's pointer addresses the decoded field; the rest is shown.
	for _, id := range []uuid.UUID{s.protoMasked, s.jsonMasked} {
		r, d := get(id, viewerToken)
		cust, _ := d.Value["customer"].(map[string]any)
		if email, _ := cust["email"].(string); r.status != 200 || strings.Trim(email, "*") != "" || email == "" || cust["name"] == nil {
			t.Errorf("masked decoded = %d %+v", r.status, d)
		}
	}
	// No principal sees a masked secret, and one without the payload permission no secret,
	// on any route that shows the failure.
	routes := func(id uuid.UUID) []string {
		p := "/api/v1/failures/" + id.String()
		return []string{p, p + "/payload", p + "/payload?format=hex", p + "/payload?format=json", p + "/payload?format=avro",
			p + "/payload?format=decoded", p + "/revisions"}
	}
	var masked, all []string
	for _, id := range []uuid.UUID{s.protoMasked, s.jsonMasked} {
		masked = append(masked, routes(id)...)
	}
	all = append(append(append(all, masked...), routes(s.protoPlain)...), routes(s.jsonPlain)...)
	exports := []string{"/api/v1/failures/export", "/api/v1/failures/export?topic=pb-secure", "/api/v1/failures/export?topic=js-secure",
		"/api/v1/failures?total=true"}
	for _, tc := range []struct {
		token  string
		routes []string
	}{
		{noPayloadToken, append(all, exports...)},
		{viewerToken, append(masked, exports[1:3]...)},
		{adminToken, append(masked, exports[1:3]...)},
	} {
		for _, path := range tc.routes {
			r := s.do("GET", path, tc.token, nil)
			if r.status >= 500 {
				t.Errorf("%s as %s = %d", path, tc.token, r.status)
			}
			if l := leaks(r.body, []string{secretProto, secretJSON}); len(l) > 0 {
				t.Errorf("%s as %s shows %v", path, tc.token, l)
			}
		}
	}
	// Positive control: the checks see a secret that is shown.
	if r := s.do("GET", routes(s.protoPlain)[5], viewerToken, nil); len(leaks(r.body, []string{secretProto})) == 0 {
		t.Error("the leak check does not see the unmasked secret")
	}
}

// Payload search finds decoded string fields of Protobuf and JSON Schema values (their bytes
// are in the record as the field holds them); it is refused, whatever the term, where the
// rules mask values or without the payload permission, so it tells no secret from a guess.
func TestSchemaPayloadsSearchedWithoutOracle(t *testing.T) {
	t.Parallel()
	s := newSchemaEnv(t)
	list := func(token, query string) (*response, int) {
		r := s.do("GET", "/api/v1/failures?"+query, token, nil)
		var page struct {
			Data []map[string]any `json:"data"`
		}
		if r.status == 200 {
			r.json(t, &page)
		}
		return r, len(page.Data)
	}
	for _, q := range []string{"topic=pb-plain&payload=" + secretProto, "topic=js-plain&payload=" + secretJSON, "topic=pb-plain&payload=A-1"} {
		if r, n := list(viewerToken, q); r.status != 200 || n != 1 {
			t.Errorf("%s = %d, %d items", q, r.status, n)
		}
	}
	if r, n := list(viewerToken, "topic=pb-plain&payload=not-in-it"); r.status != 200 || n != 0 {
		t.Errorf("miss = %d, %d items", r.status, n)
	}
	for _, tc := range []struct{ token, topic, term string }{
		{viewerToken, "pb-secure", secretProto}, {viewerToken, "pb-secure", "pb-guess-0000@example.com"},
		{viewerToken, "js-secure", secretJSON}, {viewerToken, "js-secure", "js-guess-0000@example.com"},
		{noPayloadToken, "pb-plain", secretProto}, {noPayloadToken, "pb-plain", "pb-guess-0000@example.com"},
	} {
		r, _ := list(tc.token, "topic="+tc.topic+"&payload="+tc.term)
		if p := r.problem(t); r.status != 403 || p.Field != "payload" {
			t.Errorf("search %s for %s as %s = %d %+v", tc.topic, tc.term, tc.token, r.status, p)
		}
	}
}

// A repair edits the decoded JSON and re-encodes it with the writer schema and the original
// framing; what does not fit is a 422 naming the field; an edit that changes nothing resends
// the original bytes.
func TestSchemaPayloadsRepaired(t *testing.T) {
	t.Parallel()
	s := newSchemaEnv(t)
	repair := func(id uuid.UUID, format, value string) *response {
		return s.do("POST", "/api/v1/failures/"+id.String()+"/repair", adminToken,
			map[string]any{"reason": "fix", "value_format": format, "value": value})
	}
	revisionValue := func(id uuid.UUID) []byte {
		var revs struct {
			Data []struct {
				Value struct {
					Base64 *string `json:"base64"`
				} `json:"value"`
			} `json:"data"`
		}
		s.do("GET", "/api/v1/failures/"+id.String()+"/revisions", adminToken, nil).json(t, &revs)
		if len(revs.Data) == 0 || revs.Data[len(revs.Data)-1].Value.Base64 == nil {
			t.Fatalf("no revision value of %s", id)
		}
		b, err := base64.StdEncoding.DecodeString(*revs.Data[len(revs.Data)-1].Value.Base64)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Refusals first: nothing is stored.
	before := s.checksum()
	for _, tc := range []struct {
		id             uuid.UUID
		format, value  string
		status         int
		field, mention string
	}{
		{s.protoPlain, "protobuf", `{"id":"o-1","coupon":"X"}`, 422, "value", "coupon"},
		{s.protoPlain, "protobuf", `{"quantity":"three"}`, 422, "value", "quantity"},
		{s.jsonPlain, "jsonschema", `{"id":"o-3","customer":{"name":"Eve","email":"e"},"quantity":"two"}`, 422, "value", "/quantity"},
		{s.jsonPlain, "jsonschema", `{"id":"o-3","customer":{"name":"Eve","email":"e"},"quantity":2,"extra":1}`, 422, "value", "extra"},
		{s.jsonPlain, "protobuf", `{}`, 422, "value", "is JSON Schema, not Protobuf"},
		{s.protoPlain, "yaml", `{}`, 400, "value_format", "protobuf or jsonschema"},
	} {
		r := repair(tc.id, tc.format, tc.value)
		if p := r.problem(t); r.status != tc.status || p.Field != tc.field || !strings.Contains(p.Detail, tc.mention) {
			t.Errorf("repair %s %s = %d %+v, want %d naming %s", tc.format, tc.value, r.status, p, tc.status, tc.mention)
		}
	}
	if s.checksum() != before {
		t.Fatal("a refused repair changed something")
	}

	// The form's starting point, resent unchanged, is the original byte for byte.
	var orig struct {
		Value struct {
			Base64 string `json:"base64"`
		} `json:"value"`
	}
	s.do("GET", "/api/v1/failures/"+s.protoPlain.String(), adminToken, nil).json(t, &orig)
	stored, _ := base64.StdEncoding.DecodeString(orig.Value.Base64)
	r := s.do("GET", "/api/v1/failures/"+s.protoPlain.String()+"/payload?format=decoded", adminToken, nil)
	var d struct {
		Value any `json:"value"`
	}
	r.json(t, &d)
	jb, err := json.Marshal(d.Value)
	if err != nil {
		t.Fatal(err)
	}
	js := string(jb)
	if r := repair(s.protoPlain, "protobuf", js); r.status != 200 {
		t.Fatalf("unchanged repair = %d %s", r.status, r.body)
	}
	if got := revisionValue(s.protoPlain); !bytes.Equal(got, stored) {
		t.Errorf("unchanged repair resent\n%x\nnot the original\n%x", got, stored)
	}
	// An edit keeps the framing (magic, schema id, message indexes) and changes the field.
	again := s.insert(row{Topic: "pb-plain", Value: stored, Causing: "pb-3", Offset: 5})
	if r := repair(again, "protobuf", strings.Replace(js, `"quantity":3`, `"quantity":5`, 1)); r.status != 200 {
		t.Fatalf("edited repair = %d %s", r.status, r.body)
	}
	got := revisionValue(again)
	if !bytes.Equal(got[:6], stored[:6]) || bytes.Equal(got, stored) {
		t.Errorf("edited repair resent %x (original %x)", got, stored)
	}
	var dec map[string]any
	dd, err := s.payloads.Decode("pb-plain", "value", got)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(dd.JSON, &dec); err != nil || dec["quantity"] != float64(3+2) || dec["id"] != "o-1" {
		t.Errorf("edited repair decodes to %s", dd.JSON)
	}
	// JSON Schema: the edited document, compact, behind the original schema id.
	edited := `{"id": "o-3", "customer": {"name": "Eve", "email": "eve@example.org"}, "quantity": 3}`
	if r := repair(s.jsonPlain, "jsonschema", edited); r.status != 200 {
		t.Fatalf("json schema repair = %d %s", r.status, r.body)
	}
	var jorig struct {
		Value struct {
			Base64 string `json:"base64"`
		} `json:"value"`
	}
	s.do("GET", "/api/v1/failures/"+s.jsonPlain.String(), adminToken, nil).json(t, &jorig)
	jstored, _ := base64.StdEncoding.DecodeString(jorig.Value.Base64)
	want := append(append([]byte(nil), jstored[:5]...), `{"id":"o-3","customer":{"name":"Eve","email":"eve@example.org"},"quantity":3}`...)
	if got := revisionValue(s.jsonPlain); !bytes.Equal(got, want) {
		t.Errorf("json schema repair resent %q, want %q", got, want)
	}
}
