package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
)

// Secrets in a masked Protobuf field and a masked JSON Schema field.
const (
	uiSecretProto = "pb-ui-secret-5521@example.com"
	uiSecretJSON  = "js-ui-secret-8130@example.com"
)

// The detail page decodes Protobuf and JSON Schema values with their writer schema (the
// registry's own serializers wrote them): the message type and indexes, the validation result,
// masked fields masked; no page shows a masked secret to anyone, nor any secret to a user
// without the payload permission; the repair form starts from the decoded JSON only when it
// is shown unmasked, and a Protobuf edit that does not fit is refused naming the field.
func TestSchemaPayloadPages(t *testing.T) {
	t.Parallel()
	reg := payloadtest.Registry(t)
	decoder, err := payload.New(payload.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := masking.Parse(strings.NewReader("pb-secure json /customer/email\njs-secure json /customer/email\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, fixtureOptions{resend: true,
		core: func(c *operator.Config) { c.Masking, c.Payloads = rules, decoder },
		web:  func(c *Config) { c.RepairRole = auth.RoleOperator }})
	for _, topic := range []string{"pb-secure", "js-secure", "pb-plain"} {
		f.kafka.CreateTopic(t, topic, 1)
	}
	order := func(email string) string {
		return `{"id":"o-1","customer":{"name":"Ada","email":"` + email + `"},"placedAt":"2026-03-01T12:30:00Z","quantity":3}`
	}
	insert := func(topic string, value []byte) uuid.UUID {
		return testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: topic, Value: value, PublisherService: "shop"})
	}
	pbSecure := insert("pb-secure", payloadtest.Protobuf(t, reg, "pb-secure", "shop.Order", order(uiSecretProto)))
	jsSecure := insert("js-secure", payloadtest.JSONSchema(t, reg, "js-secure", payloadtest.Order{ID: "o-2",
		Customer: payloadtest.Customer{Name: "Eve", Email: uiSecretJSON}, Quantity: 2}))
	pbPlain := insert("pb-plain", payloadtest.Protobuf(t, reg, "pb-plain", "shop.Order.Customer", `{"name":"Bob","email":"bob@example.com"}`))

	op := f.client()
	op.login(operatorToken)
	_, body := op.do("GET", "/failures/"+pbPlain.String(), nil)
	mustContain(t, "protobuf detail", body, `id="view-decoded"`, `data-default="decoded"`,
		"Protobuf message shop.Order.Customer in the Confluent wire format", "message indexes [0 0]", "bob@example.com")
	_, body = op.do("GET", "/failures/"+jsSecure.String(), nil)
	mustContain(t, "json schema detail", body, "JSON Schema in the Confluent wire format", `id="validation"`,
		"validates against its JSON Schema", "Eve")
	_, body = op.do("GET", "/failures/"+pbSecure.String(), nil)
	mustContain(t, "masked protobuf detail", body, "Protobuf message shop.Order", "2026-03-01T12:30:00Z", "Ada")

	// The repair form: the decoded JSON, in its format, when shown unmasked; withheld when masked.
	_, body = op.do("GET", "/failures/"+pbPlain.String()+"/repair", nil)
	mustContain(t, "protobuf repair form", body, `<option value="protobuf" selected>`, "bob@example.com")
	_, body = op.do("GET", "/failures/"+pbSecure.String()+"/repair", nil)
	mustContain(t, "masked protobuf repair form", body, `id="value-withheld"`)

	// A Protobuf edit that does not fit: refused, naming the field; nothing stored.
	page := "/failures/" + pbPlain.String() + "/repair"
	form := url.Values{"csrf": {op.csrf(page)}, "reason": {"fix"}, "target_topic": {"pb-plain"},
		"value_format": {"protobuf"}, "value": {`{"name":"Bob","phone":"1"}`}}
	resp, body := op.do("POST", page, form)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="repair-error"`) || !strings.Contains(body, "phone") {
		t.Errorf("misfit protobuf repair = %d, error naming phone in page: %v", resp.StatusCode, strings.Contains(body, "phone"))
	}

	// No page leaks a masked secret; none leaks any secret without the payload permission.
	pages := func(ids ...uuid.UUID) []string {
		var out []string
		for _, id := range ids {
			p := "/failures/" + id.String()
			out = append(out, p, p+"/repair", p+"/value")
		}
		return out
	}
	masked := append(pages(pbSecure, jsSecure), "/failures/export?topic=pb-secure", "/failures/export?topic=js-secure")
	for _, tc := range []struct {
		token string
		pages []string
	}{
		{operatorToken, masked},
		{noPayloadToken, append(masked, pages(pbPlain)...)},
	} {
		c := f.client()
		c.login(tc.token)
		for _, p := range tc.pages {
			resp, body := c.do("GET", p, nil)
			if resp.StatusCode >= 500 {
				t.Errorf("%s = %d", p, resp.StatusCode)
			}
			if l := uiLeaks(body, []string{uiSecretProto, uiSecretJSON}); len(l) > 0 {
				t.Errorf("%s as %s shows %v", p, tc.token, l)
			}
		}
		// Search: refused over masked topics (and without the permission), whatever the term;
		// a decoded field search matches the masked view, where the secret is asterisks.
		for _, q := range []string{"topic=pb-secure&payload=" + uiSecretProto, "topic=pb-secure&payload=pb-ui-guess-0000@example.com",
			"topic=pb-secure&payload_field=/customer/email&payload_field_value=" + url.QueryEscape(uiSecretProto),
			"topic=pb-secure&payload_field=/customer/email&payload_field_contains=ui-secret"} {
			_, body := c.do("GET", "/failures?"+q, nil)
			if strings.Contains(body, pbSecure.String()) {
				t.Errorf("search %s as %s lists the masked failure", q, tc.token)
			}
		}
	}

	// A decoded field search from the list form: the Protobuf failure whose decoded field
	// matches, with what the scan decoded; the masked one stays out for everyone.
	_, body = op.do("GET", "/failures?topic=pb-plain&payload_field=%2Femail&payload_field_value=bob%40example.com", nil)
	mustContain(t, "decoded field search", body, `data-id="`+pbPlain.String()+`"`, "1 matching on this page, 1 candidate decoded",
		`name="payload_field" id="f-payload-field" value="/email"`, `id="advanced-search" open`)
	_, body = op.do("GET", "/failures?topic=pb-plain&payload_field=%2Femail&payload_field_value=eve%40example.com", nil)
	if strings.Contains(body, `data-id="`+pbPlain.String()+`"`) {
		t.Error("a decoded field search lists a failure whose field does not match")
	}
	resp, body = op.do("GET", "/failures?payload_field=customer", nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad pointer: %d", resp.StatusCode)
	}
	mustContain(t, "bad pointer", body, `id="filter-error">payload_field: `)
}
