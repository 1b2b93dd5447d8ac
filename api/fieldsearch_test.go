package api_test

import (
	"bytes"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
)

// fieldQuery is a bounded decoded field search of topic for value.
func fieldQuery(topic, ptr, value string) string {
	v := url.Values{}
	v.Set("topic", topic)
	v.Set("payload_field", ptr)
	if value != "" {
		v.Set("payload_field_value", value)
	}
	return v.Encode()
}

type fieldPage struct {
	Data []struct {
		ID uuid.UUID `json:"id"`
	} `json:"data"`
	NextCursor *string `json:"next_cursor"`
	Scan       *struct {
		Scanned int  `json:"scanned"`
		Limited bool `json:"limited"`
	} `json:"scan"`
}

// A decoded field search through the API finds registry-framed Protobuf and JSON Schema
// values by field; the secret of a masked field matches nothing for any principal with the
// payload permission, and every principal without it gets the same 403 whatever the term.
func TestFieldSearchThroughAPI(t *testing.T) {
	t.Parallel()
	s := newSchemaEnv(t)
	payloadTokens := []string{viewerToken, operatorToken, adminToken}
	for _, tc := range []struct {
		q    string
		want []uuid.UUID
	}{
		{fieldQuery("pb-plain", "/customer/email", secretProto), []uuid.UUID{s.protoPlain}},
		{fieldQuery("js-plain", "/customer/email", secretJSON), []uuid.UUID{s.jsonPlain}},
		{fieldQuery("pb-plain", "/lines/0/sku", "A-1"), []uuid.UUID{s.protoPlain}},
		{fieldQuery("pb-plain", "/total/units", "1250"), []uuid.UUID{s.protoPlain}},
		{fieldQuery("pb-secure", "/customer/email", secretProto), nil},
		{fieldQuery("js-secure", "/customer/email", secretJSON), nil},
		{fieldQuery("pb-secure", "/customer/email", ""), []uuid.UUID{s.protoMasked}},
		{fieldQuery("pb-secure", "/customer/name", "Ada"), []uuid.UUID{s.protoMasked}},
	} {
		for _, tok := range payloadTokens {
			r := s.do("GET", "/api/v1/failures?"+tc.q, tok, nil)
			if r.status != 200 {
				t.Errorf("%s: %d %s", tc.q, r.status, r.body)
				continue
			}
			var p fieldPage
			r.json(t, &p)
			var got []uuid.UUID
			for _, d := range p.Data {
				got = append(got, d.ID)
			}
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) || p.Scan == nil || p.Scan.Scanned != 1 || p.Scan.Limited {
				t.Errorf("%s: %s, want %v", tc.q, r.body, tc.want)
			}
			if bytes.Contains(r.body, []byte(secretProto)) || bytes.Contains(r.body, []byte(secretJSON)) {
				t.Errorf("%s: the page shows a secret: %s", tc.q, r.body)
			}
		}
	}
	// Contains over the masked topic, any principal: nothing.
	for _, tok := range payloadTokens {
		r := s.do("GET", "/api/v1/failures?topic=pb-secure&payload_field=/customer/email&payload_field_contains=pb-secret", tok, nil)
		var p fieldPage
		r.json(t, &p)
		if r.status != 200 || len(p.Data) != 0 {
			t.Errorf("contains a masked secret: %d %s", r.status, r.body)
		}
	}
	// Without the payload permission: 403 naming payload_field, byte-identical for the secret
	// and a wrong guess, on every path.
	guess := "pb-guess-0000@example.com"
	for _, path := range []func(q string) *response{
		func(q string) *response { return s.do("GET", "/api/v1/failures?"+q, noPayloadToken, nil) },
		func(q string) *response { return s.do("GET", "/api/v1/failures/export?"+q, noPayloadToken, nil) },
		func(q string) *response { return s.do("GET", "/api/v1/failures?"+q, noPayloadOperatorToken, nil) },
		func(q string) *response {
			return s.do("POST", "/api/v1/failures/close", noPayloadOperatorToken, map[string]any{"filter": queryMap(q), "dry_run": true})
		},
		func(q string) *response {
			return s.do("POST", "/api/v1/jobs", noPayloadOperatorToken, map[string]any{"action": "close", "reason": "probe", "filter": queryMap(q)})
		},
	} {
		a, b := path(fieldQuery("pb-secure", "/customer/email", secretProto)), path(fieldQuery("pb-secure", "/customer/email", guess))
		if a.status != 403 || a.status != b.status || !bytes.Equal(a.body, b.body) {
			t.Errorf("secret %d %s, guess %d %s; want the same 403", a.status, a.body, b.status, b.body)
			continue
		}
		if p := a.problem(t); p.Field != "payload_field" {
			t.Errorf("403 names %q: %s", p.Field, a.body)
		}
	}
	// A dry run by a JSON filter with the field counts the matches.
	r := s.do("POST", "/api/v1/failures/close", adminToken, map[string]any{"dry_run": true, "filter": map[string]any{
		"created_from": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "created_to": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"payload_field": "/customer/name", "payload_field_value": "Eve"}})
	var dry struct {
		Matched int `json:"matched"`
	}
	r.json(t, &dry)
	if r.status != 200 || dry.Matched != 2 {
		t.Errorf("dry run: %d %s, want 2 matched (the JSON Schema orders)", r.status, r.body)
	}
}

// queryMap turns a query string into a JSON filter.
func queryMap(q string) map[string]any {
	v, _ := url.ParseQuery(q)
	out := map[string]any{}
	for k := range v {
		out[k] = v.Get(k)
	}
	return out
}

// Bad decoded field searches are 400 problems naming the field.
func TestFieldSearchRefusedThroughAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, tc := range []struct{ q, field string }{
		{"payload_field=/customer/email&payload_field_value=x", "payload_field"},
		{"topic=t&payload_field=customer", "payload_field"},
		{"topic=t&payload_field=/a//b", "payload_field"},
		{"topic=t&payload_field=/a~9", "payload_field"},
		{"topic=t&payload_field_value=x", "payload_field_value"},
		{"topic=t&payload_field=/a&payload_field_value=x&payload_field_contains=y", "payload_field_contains"},
		{"topic=t&payload_field=/a&total=true", "payload_field"},
	} {
		r := e.do("GET", "/api/v1/failures?"+tc.q, viewerToken, nil)
		if r.status != 400 {
			t.Errorf("%s: %d %s, want 400", tc.q, r.status, r.body)
			continue
		}
		if p := r.problem(t); p.Field != tc.field {
			t.Errorf("%s: names %q, want %q", tc.q, p.Field, tc.field)
		}
	}
}
