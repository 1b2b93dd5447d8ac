package web

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
)

// Secrets of the UI's confidentiality tests, each with a wrong guess of the same length.
const (
	uiSecretMasked = "SSN-7730-1866-4412" // a masked JSON field and header of topic "secure"
	uiGuessMasked  = "SSN-0000-0000-0000"
	uiSecretKey    = "KEY-9f3c2a7e5b1d4c6a" // the key of the secure failures (keys are not masked)
	uiGuessKey     = "KEY-0000000000000000"
	uiSecretPlain  = "PLAIN-5d8e1a0c9b77" // the value of a failure of "orders" (no rules)
	uiGuessPlain   = "PLAIN-000000000000"
)

// Tokens of the UI's confidentiality tests.
const (
	confNinaToken = "conf-nina-token-0123456789"  // viewer, no payload permission
	confOlgaToken = "conf-olga-token-0123456789"  // operator, no payload permission
	confVeraToken = "conf-vera-token-0123456789"  // viewer with the payload permission
	confOttoToken = "conf-otto-token-0123456789"  // operator with the payload permission
	confAdaToken  = "conf-ada-token-01234567890a" // admin
)

type uiPrincipal struct {
	name, token string
	payload     bool
	operator    bool
}

var uiPrincipals = []uiPrincipal{
	{"viewer without payload", confNinaToken, false, false},
	{"operator without payload", confOlgaToken, false, true},
	{"viewer with payload", confVeraToken, true, false},
	{"operator with payload", confOttoToken, true, true},
	{"admin", confAdaToken, true, true},
}

func (p uiPrincipal) forbidden() []string {
	if !p.payload {
		return []string{uiSecretMasked, uiSecretKey, uiSecretPlain}
	}
	return []string{uiSecretMasked}
}

// decodedLines returns the base64 strings of the JSON lines of body (an export) decoded.
func decodedLines(body string) string {
	var sb strings.Builder
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case string:
			if b, err := base64.StdEncoding.DecodeString(t); err == nil {
				sb.WriteString("\n")
				sb.Write(b)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	for _, line := range strings.Split(body, "\n") {
		var v any
		if json.Unmarshal([]byte(line), &v) == nil {
			walk(v)
		}
	}
	return sb.String()
}

// uiLeaks returns the secrets of forbidden found in a page, as text, as a hex dump, or in
// base64 in the lines of an export.
func uiLeaks(body string, forbidden []string) []string {
	flat := strings.NewReplacer(" ", "", "\n", "").Replace(strings.ToLower(body))
	decoded := decodedLines(body)
	var out []string
	for _, s := range forbidden {
		if strings.Contains(body, s) || strings.Contains(decoded, s) || strings.Contains(flat, hex.EncodeToString([]byte(s))[:24]) {
			out = append(out, s)
		}
	}
	return out
}

// confFixture is the UI with masking rules for "secure", failures holding the secrets, a
// repair of one of them to the unmasked topic "orders", a job previewed by key and a close by
// the payload of "orders".
type confFixture struct {
	*fixture
	sec1, sec2, plain uuid.UUID
	job               uuid.UUID
	group             int64
}

func newConfFixture(t *testing.T) *confFixture {
	t.Helper()
	rules, err := masking.Parse(strings.NewReader("secure json /ssn\nsecure header x-secret\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokens("nina:viewer:" + confNinaToken + ",olga:operator:" + confOlgaToken +
		",vera:viewer+payload:" + confVeraToken + ",otto:operator+payload:" + confOttoToken + ",ada:admin:" + confAdaToken)
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewAuthenticator(auth.Config{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, fixtureOptions{resend: true,
		core: func(c *operator.Config) {
			c.Masking, c.RepairTopics, c.MaxBulk = rules, []string{"orders"}, 100
		},
		web: func(c *Config) { c.Auth, c.RepairRole, c.PageSize = authn, auth.RoleOperator, 50 },
	})
	f.kafka.CreateTopic(t, "secure", 1)
	c := &confFixture{fixture: f}
	base := time.Now().Add(-30 * time.Minute).UTC()
	secure := func(i int) uuid.UUID {
		return testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "secure", Key: []byte(uiSecretKey),
			CreatedAt: base.Add(time.Duration(i) * time.Minute), Causing: fmt.Sprintf("secure-%d", i), ErrorCode: "BAD_SSN",
			PublisherService: "kyc", Value: []byte(`{"name":"ann","ssn":"` + uiSecretMasked + `"}`),
			HeaderNames: []string{"x-secret", "x-plain"}, HeaderValues: [][]byte{[]byte(uiSecretMasked), []byte("hello")}})
	}
	c.sec1, c.sec2 = secure(1), secure(2)
	c.plain = testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "orders", Key: []byte("plain-key"),
		CreatedAt: base.Add(3 * time.Minute), Causing: "plain-1", Value: []byte(`{"note":"` + uiSecretPlain + `"}`)})
	if err := f.pool.QueryRow(context.Background(), `SELECT group_id FROM failures WHERE id = $1`, c.sec1).Scan(&c.group); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.core.Repair(ctx, operator.RepairRequest{ID: c.sec1, Principal: "ada", Reason: "move", TargetTopic: "orders", Payload: true}); err != nil {
		t.Fatal(err)
	}
	prev, err := f.core.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Principal: "ada", Reason: "by key", Payload: true,
		Selection: operator.Selection{Filter: &redrive.Filter{Key: []byte(uiSecretKey)}}})
	if err != nil {
		t.Fatal(err)
	}
	c.job = prev.Job.ID
	if _, err := f.core.Act(ctx, operator.ActionRequest{Action: operator.Close, Principal: "ada", Reason: "by payload", Payload: true,
		Selection: operator.Selection{Filter: &redrive.Filter{Topic: "orders", Payload: []byte(uiSecretPlain)}}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// pages are every page of the UI that shows something of the seeded failures.
func (c *confFixture) pages() []string {
	var out []string
	for _, id := range []uuid.UUID{c.sec1, c.sec2, c.plain} {
		p := "/failures/" + id.String()
		out = append(out, p, p+"/value", p+"/key", p+"/repair", p+"/repair?revision=1")
	}
	j := "/jobs/" + c.job.String()
	return append(out, "/", "/failures", "/failures?topic=secure", "/failures/export", "/failures/export?topic=secure",
		"/groups", fmt.Sprintf("/groups/%d", c.group), "/jobs", j, j+"/progress", "/dead-letters")
}

// Every page, for every principal class, shows none of the secrets the class may not see:
// the detail, the payload downloads, the repair page with the revision's diff, the list, the
// export, the groups, the jobs (whose selection was a key) and the audit (a close by payload).
// Positive controls prove the checks would see a secret that is shown.
func TestUIConfidentialityEveryPage(t *testing.T) {
	t.Parallel()
	c := newConfFixture(t)
	for _, p := range uiPrincipals {
		cl := c.client()
		cl.login(p.token)
		for _, path := range c.pages() {
			resp, body := cl.do("GET", path, nil)
			if resp.StatusCode >= 500 {
				t.Errorf("%s GET %s = %d", p.name, path, resp.StatusCode)
			}
			if l := uiLeaks(body, p.forbidden()); len(l) > 0 {
				t.Errorf("%s GET %s (%d) shows %q", p.name, path, resp.StatusCode, l)
			}
		}
	}
	ada := c.client()
	ada.login(confAdaToken)
	for _, pc := range []struct{ path, secret string }{
		{"/failures/" + c.sec1.String(), uiSecretKey},
		{"/failures/" + c.plain.String(), uiSecretPlain},
		{"/jobs/" + c.job.String(), uiSecretKey},
		{"/failures/export", uiSecretKey},
	} {
		if _, body := ada.do("GET", pc.path, nil); len(uiLeaks(body, []string{pc.secret})) == 0 {
			t.Errorf("control: %s does not show %q", pc.path, pc.secret)
		}
	}
	// The job page of a principal without the payload permission links no list for the
	// hidden selection.
	nina := c.client()
	nina.login(confNinaToken)
	if _, body := nina.do("GET", "/jobs/"+c.job.String(), nil); !strings.Contains(body, operator.HiddenTerm) ||
		strings.Contains(body, "what the filter selects now") {
		t.Errorf("job page of a viewer without payload: selection not hidden, or still linked")
	}
}

// The failure list, its export, the bulk confirmation (a dry run that counts) and the job
// preview answer a secret and a wrong guess alike to every principal who may not see the
// secret (the page echoes the term typed, so it is replaced before comparing): the criterion
// is refused with a 403 naming it.
func TestUIConfidentialitySearchIsNoOracle(t *testing.T) {
	t.Parallel()
	c := newConfFixture(t)
	type probe struct {
		name          string
		term, guess   string
		filter        func(term string) url.Values
		refusedToMask bool // refused with the payload permission too (masked bytes)
	}
	probes := []probe{
		{"payload of the masked topic", uiSecretMasked, uiGuessMasked,
			func(s string) url.Values { return url.Values{"topic": {"secure"}, "payload": {s}} }, true},
		{"masked header value", uiSecretMasked, uiGuessMasked,
			func(s string) url.Values { return url.Values{"header": {"x-secret=" + s}} }, true},
		{"key", uiSecretKey, uiGuessKey, func(s string) url.Values { return url.Values{"key": {s}} }, false},
		{"key prefix", uiSecretKey[:8], uiGuessKey[:8], func(s string) url.Values { return url.Values{"key_prefix": {s}} }, false},
		{"payload of an unmasked topic", uiSecretPlain, uiGuessPlain,
			func(s string) url.Values { return url.Values{"topic": {"orders"}, "payload": {s}} }, false},
	}
	for _, p := range uiPrincipals {
		cl := c.client()
		cl.login(p.token)
		csrf := cl.csrf("/failures")
		for _, pr := range probes {
			if p.payload && !pr.refusedToMask {
				continue
			}
			asks := map[string]func(term string) (*http.Response, string){
				"list": func(s string) (*http.Response, string) {
					return cl.do("GET", "/failures?"+pr.filter(s).Encode(), nil)
				},
				"export": func(s string) (*http.Response, string) {
					return cl.do("GET", "/failures/export?"+pr.filter(s).Encode(), nil)
				},
			}
			if p.operator {
				post := func(path string) func(string) (*http.Response, string) {
					return func(s string) (*http.Response, string) {
						v := pr.filter(s)
						v.Set("csrf", csrf)
						v.Set("scope", "all")
						v.Set("action", "close")
						v.Set("reason", "probe")
						return cl.do("POST", path, v)
					}
				}
				asks["confirm"], asks["job preview"] = post("/failures/confirm"), post("/jobs/preview")
			}
			for name, ask := range asks {
				ra, a := ask(pr.term)
				rb, b := ask(pr.guess)
				a, b = strings.ReplaceAll(a, pr.term, "TERM"), strings.ReplaceAll(b, pr.guess, "TERM")
				if ra.StatusCode != rb.StatusCode || a != b {
					t.Errorf("%s, %s, %s: the secret gets %d, the guess %d (pages differ: %v)", p.name, pr.name, name, ra.StatusCode, rb.StatusCode, a != b)
				}
				if ra.StatusCode != http.StatusForbidden {
					t.Errorf("%s, %s, %s: %d, want 403", p.name, pr.name, name, ra.StatusCode)
				}
			}
		}
	}
}

// The list's form offers the key, key prefix, payload and decoded field criteria only to principals who may
// search by them.
func TestUIFilterFormFollowsPermission(t *testing.T) {
	t.Parallel()
	c := newConfFixture(t)
	for _, p := range []struct {
		token    string
		disabled bool
	}{{confNinaToken, true}, {confVeraToken, false}} {
		cl := c.client()
		cl.login(p.token)
		_, body := cl.do("GET", "/failures", nil)
		for _, id := range []string{"f-key", "f-key-prefix", "f-payload", "f-payload-field", "f-payload-field-value", "f-payload-field-contains"} {
			if got := strings.Contains(body, `id="`+id+`" disabled`); got != p.disabled {
				t.Errorf("%s: %s disabled = %v, want %v", p.token, id, got, p.disabled)
			}
		}
	}
}
