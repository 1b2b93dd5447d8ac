package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
)

// The secrets of the masked failures: a JSON member and a header value that the rules mask.
const (
	secretSSN    = "123-45-6789"
	secretHeader = "Bearer s3cr3t-t0ken"
)

// newMaskedFixture returns a fixture whose core masks the ssn member and the authorization
// header of the topic "secrets", and two open failures of that topic holding the secrets.
func newMaskedFixture(t *testing.T) (*fixture, []uuid.UUID) {
	t.Helper()
	rules, err := masking.Parse(strings.NewReader("secrets json /ssn\nsecrets header authorization"), "test")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, fixtureOptions{resend: true,
		core: func(c *operator.Config) { c.Masking = rules },
		web:  func(c *Config) { c.RepairRole = auth.RoleOperator }})
	f.kafka.CreateTopic(t, "secrets", 1)
	var ids []uuid.UUID
	for range 2 {
		ids = append(ids, testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "secrets", PublisherService: "vault",
			Value: []byte(`{"ssn":"` + secretSSN + `","order":3}`), HeaderNames: []string{"authorization", "trace"},
			HeaderValues: [][]byte{[]byte(secretHeader), []byte("t-1")}}))
	}
	return f, ids
}

// The repair form of a failure whose value and a header are masked for the user does not start
// from the masked view: it keeps the original unless the user gives a whole new value, and a
// submission that still holds the mask's asterisks is refused naming the field. A repair that
// keeps the value resends the original bytes, never asterisks.
func TestRepairFormMasked(t *testing.T) {
	t.Parallel()
	f, ids := newMaskedFixture(t)
	page := "/failures/" + ids[0].String() + "/repair"
	op := f.client()
	op.login(operatorToken)
	_, body := op.do("GET", page, nil)
	mustContain(t, "masked repair form", body, `id="repair-form"`, `id="value-withheld"`, `id="headers-withheld"`,
		`<option value="" selected>keep the original value</option>`, `id="value" rows="16" spellcheck="false"></textarea>`)
	for _, leak := range []string{secretSSN, "s3cr3t", "***********", `id="headers-edit"`} {
		if strings.Contains(body, leak) {
			t.Errorf("the masked repair form holds %q", leak)
		}
	}
	tok := op.csrf(page)

	// The masked view pasted back: refused, naming the field; nothing stored.
	for _, c := range []struct {
		name  string
		form  url.Values
		field string
	}{
		{"masked value", url.Values{"value_format": {"json"}, "value": {`{"ssn":"***********","order":4}`}}, "Value:"},
		{"masked header", url.Values{"headers": {"authorization: *******************\ntrace: t-1"}}, "Headers[0].value:"},
		{"text without a format", url.Values{"value": {`{"order":4}`}}, "Choose the format"},
	} {
		c.form.Set("csrf", tok)
		c.form.Set("reason", "fix the order")
		c.form.Set("target_topic", "secrets")
		resp, body := op.do("POST", page, c.form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="repair-error"`) || !strings.Contains(body, c.field) {
			t.Errorf("%s: %d, want 400 with an error naming %q:\n%s", c.name, resp.StatusCode, c.field, body)
		}
	}
	if revs, _ := f.core.Revisions(context.Background(), ids[0], operator.Reader{Payload: true}); len(revs) != 0 {
		t.Fatalf("a refused repair stored %d revisions", len(revs))
	}

	// Submitted as the form renders it (the value kept, no headers field): the original value
	// and headers are resent byte for byte.
	resp, body := op.postMultipart(page, [][2]string{{"csrf", tok}, {"value_format", ""}, {"value", ""},
		{"target_topic", "secrets"}, {"reason", "resend as it is"}}, "upload", nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("repair keeping the original = %d %s", resp.StatusCode, body)
	}
	rec := f.kafka.ConsumeN(t, "secrets", 1, time.Minute)[0]
	if string(rec.Value) != `{"ssn":"`+secretSSN+`","order":3}` {
		t.Errorf("resent value = %q, want the original", rec.Value)
	}
	headers := map[string]string{}
	for _, h := range rec.Headers {
		headers[h.Key] = string(h.Value)
	}
	if headers["authorization"] != secretHeader || headers["trace"] != "t-1" {
		t.Errorf("resent headers = %v, want the original ones", headers)
	}

	// A whole new value is taken as given.
	page = "/failures/" + ids[1].String() + "/repair"
	resp, body = op.do("POST", page, url.Values{"csrf": {tok}, "value_format": {"json"}, "value": {`{"ssn":"987-65-4321","order":3}`},
		"target_topic": {"secrets"}, "reason": {"corrected ssn"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("repair with a new value = %d %s", resp.StatusCode, body)
	}
	if rec := f.kafka.ConsumeN(t, "secrets", 2, time.Minute)[1]; string(rec.Value) != `{"ssn":"987-65-4321","order":3}` {
		t.Errorf("resent value = %q", rec.Value)
	}
}

// A viewer without the payload permission gets no form and no payload; one who sees the
// record unmasked starts from the original (TestRepairPage).
func TestRepairFormHidden(t *testing.T) {
	t.Parallel()
	f, ids := newMaskedFixture(t)
	nina := f.client()
	nina.login(noPayloadToken)
	_, body := nina.do("GET", "/failures/"+ids[0].String()+"/repair", nil)
	if strings.Contains(body, `id="repair-form"`) || !strings.Contains(body, `id="repair-hidden"`) {
		t.Errorf("a viewer without the payload permission is offered the repair form")
	}
	for _, leak := range []string{secretSSN, "s3cr3t", "t-1"} {
		if strings.Contains(body, leak) {
			t.Errorf("the hidden repair page holds %q", leak)
		}
	}
}
