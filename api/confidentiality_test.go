package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/masking"
)

// Secrets of the confidentiality tests, each with a wrong guess of the same length.
const (
	// secretMasked is in a masked JSON field and a masked header of topic "secure".
	secretMasked = "SSN-7730-1866-4412"
	guessMasked  = "SSN-0000-0000-0000"
	// secretKey is the key of the failures of "secure" (keys are not masked: the payload
	// permission shows them).
	secretKey = "KEY-9f3c2a7e5b1d4c6a"
	guessKey  = "KEY-0000000000000000"
	// secretPlain is in the value of a failure of "orders", which has no masking rules.
	secretPlain = "PLAIN-5d8e1a0c9b77"
	guessPlain  = "PLAIN-000000000000"
)

// Tokens of the principal classes beyond the shared ones: an operator without the payload
// permission (who may repair here: the repair role is operator).
const noPayloadOperatorToken = "olga-token-0123456789abcd"

// principalClass is what a principal may see of the seeded secrets.
type principalClass int

const (
	classNone   principalClass = iota // no payload permission: no secret
	classMasked                       // payload permission: the key and unmasked topics, not masked parts
)

type principalCase struct {
	name  string
	token string
	class principalClass
}

var confPrincipals = []principalCase{
	{"viewer without payload", noPayloadToken, classNone},
	{"operator without payload", noPayloadOperatorToken, classNone},
	{"viewer with payload", viewerToken, classMasked},
	{"operator with payload", operatorToken, classMasked},
	{"admin", adminToken, classMasked},
}

// forbiddenSecrets are the secrets a class may not see.
func (c principalClass) forbiddenSecrets() []string {
	if c == classNone {
		return []string{secretMasked, secretKey, secretPlain}
	}
	return []string{secretMasked}
}

// exposed returns body with every JSON string in it that is base64 also decoded, so that a
// secret inside encoded bytes is found too.
func exposed(body []byte) string {
	var sb strings.Builder
	sb.Write(body)
	var v any
	if json.Unmarshal(body, &v) != nil {
		// NDJSON: each line.
		for _, line := range bytes.Split(body, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 && !bytes.Equal(line, body) {
				sb.WriteString(exposed(line))
			}
		}
		return sb.String()
	}
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
	walk(v)
	return sb.String()
}

// leaks returns the forbidden secrets found in body (as text, in base64 inside JSON, or in
// hex).
func leaks(body []byte, forbidden []string) []string {
	text := exposed(body)
	flat := strings.NewReplacer(" ", "", "\n", "").Replace(strings.ToLower(string(body)))
	var out []string
	for _, s := range forbidden {
		if strings.Contains(text, s) || strings.Contains(flat, hex.EncodeToString([]byte(s))) {
			out = append(out, s)
		}
	}
	return out
}

// confEnv is an API with masking rules for topic "secure", failures holding the secrets,
// and everything that describes them (a repair to an unmasked topic, a job by key, a close by
// payload, repairs by principals with and without the payload permission).
type confEnv struct {
	*env
	sec1, sec2, sec3, plain uuid.UUID
	job                     string
	group                   int64
	// answers are the bodies of the actions' answers, by the class of who asked.
	answers []confAnswer
}

type confAnswer struct {
	name  string
	class principalClass
	body  []byte
}

func newConfEnv(t *testing.T) *confEnv {
	t.Helper()
	rules, err := masking.Parse(strings.NewReader("secure json /ssn\nsecure header x-secret\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(s *setup) {
		s.Core.Masking = rules
		s.Core.RepairTopics = []string{"orders"}
		s.API.RepairRole = auth.RoleOperator
		tokens, err := auth.ParseTokens("olga:operator:" + noPayloadOperatorToken)
		if err != nil {
			t.Fatal(err)
		}
		s.Auth.Tokens = append(s.Auth.Tokens, tokens...)
	})
	e.cluster.CreateTopic(t, "secure", 1)
	c := &confEnv{env: e}
	base := time.Now().Add(-time.Hour).UTC()
	secure := func(i int) uuid.UUID {
		return e.insert(row{Topic: "secure", Key: []byte(secretKey), CreatedAt: base.Add(time.Duration(i) * time.Minute),
			Offset: int64(100 + i), Causing: fmt.Sprintf("secure-%d", i), ErrorCode: "BAD_SSN", PublisherService: "kyc",
			Value:       []byte(`{"name":"ann","ssn":"` + secretMasked + `"}`),
			HeaderNames: []string{"x-secret", "x-plain"}, HeaderValues: [][]byte{[]byte(secretMasked), []byte("hello")}})
	}
	c.sec1, c.sec2, c.sec3 = secure(1), secure(2), secure(3)
	c.plain = e.insert(row{Topic: "orders", Key: []byte("plain-key"), CreatedAt: base.Add(4 * time.Minute), Offset: 200,
		Causing: "plain-1", Value: []byte(`{"note":"` + secretPlain + `"}`)})

	var d struct {
		GroupID int64 `json:"group_id"`
	}
	e.do("GET", "/api/v1/failures/"+c.sec1.String(), adminToken, nil).json(t, &d)
	c.group = d.GroupID

	must := func(r *response, status int, what string) *response {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s = %d %s", what, r.status, r.body)
		}
		return r
	}
	// A repair of a secure failure to the unmasked topic "orders", value unchanged.
	must(e.do("POST", "/api/v1/failures/"+c.sec1.String()+"/repair", adminToken,
		map[string]any{"reason": "move", "target_topic": "orders"}), 200, "admin repair")
	// Repairs answered to an operator without and one with the payload permission.
	r := must(e.do("POST", "/api/v1/failures/"+c.sec2.String()+"/repair", noPayloadOperatorToken,
		map[string]any{"reason": "again", "target_topic": "orders"}), 200, "repair without payload")
	c.answers = append(c.answers, confAnswer{"repair answer (no payload)", classNone, r.body})
	r = must(e.do("POST", "/api/v1/failures/"+c.sec3.String()+"/repair", operatorToken,
		map[string]any{"reason": "again", "target_topic": "orders"}), 200, "repair with payload")
	c.answers = append(c.answers, confAnswer{"repair answer (payload)", classMasked, r.body})
	// A job previewed by key, and a close by payload of the unmasked topic: both describe
	// their filters.
	r = must(e.do("POST", "/api/v1/jobs", adminToken, map[string]any{"action": "close", "reason": "by key",
		"filter": map[string]any{"key": secretKey}}), 201, "job preview by key")
	c.answers = append(c.answers, confAnswer{"job preview (admin)", classMasked, r.body})
	var prev struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	r.json(t, &prev)
	c.job = prev.Job.ID
	must(e.do("POST", "/api/v1/failures/close", adminToken, map[string]any{"reason": "by payload",
		"filter": map[string]any{"topic": "orders", "payload": secretPlain}}), 200, "close by payload")
	// A job an operator without the payload permission previews by ids.
	r = must(e.do("POST", "/api/v1/jobs", noPayloadOperatorToken, map[string]any{"action": "close", "reason": "by ids",
		"ids": []string{c.sec1.String()}}), 201, "job preview by ids")
	c.answers = append(c.answers, confAnswer{"job preview (no payload)", classNone, r.body})
	return c
}

// routes are every GET route of the API that shows something of the seeded failures.
func (c *confEnv) routes() []string {
	var out []string
	for _, id := range []uuid.UUID{c.sec1, c.sec2, c.sec3, c.plain} {
		p := "/api/v1/failures/" + id.String()
		out = append(out, p, p+"/payload", p+"/payload?part=key", p+"/payload?format=hex", p+"/payload?format=json",
			p+"/payload?format=avro", p+"/revisions")
	}
	j := "/api/v1/jobs/" + c.job
	return append(out, "/api/v1/failures?total=true", "/api/v1/failures?topic=secure&total=true",
		"/api/v1/failures/export", "/api/v1/failures/export?topic=secure", "/api/v1/stats", "/api/v1/groups",
		fmt.Sprintf("/api/v1/groups/%d", c.group), "/api/v1/jobs", j, j+"/items", j+"/audit",
		"/api/v1/notifications", "/api/v1/dead-letters/reactivations")
}

// Every GET route, for every principal class, shows none of the secrets the class may not
// see; the answers to repairs and job previews neither. Positive controls prove the checks
// would see a secret that is shown.
func TestConfidentialityEveryRoute(t *testing.T) {
	t.Parallel()
	c := newConfEnv(t)
	for _, p := range confPrincipals {
		for _, path := range c.routes() {
			r := c.do("GET", path, p.token, nil)
			if r.status >= 500 {
				t.Errorf("%s GET %s = %d %s", p.name, path, r.status, r.body)
			}
			if l := leaks(r.body, p.class.forbiddenSecrets()); len(l) > 0 {
				t.Errorf("%s GET %s (%d) shows %q:\n%s", p.name, path, r.status, l, r.body)
			}
		}
	}
	for _, a := range c.answers {
		if l := leaks(a.body, a.class.forbiddenSecrets()); len(l) > 0 {
			t.Errorf("%s shows %q:\n%s", a.name, l, a.body)
		}
	}
	// Positive controls: a principal who may see a secret sees it, so the checks find it.
	for _, pc := range []struct {
		path, token, secret string
	}{
		{"/api/v1/failures/" + c.sec3.String(), viewerToken, secretKey},
		{"/api/v1/failures/" + c.plain.String(), viewerToken, secretPlain},
		{"/api/v1/failures/" + c.plain.String(), adminToken, secretPlain}, // the close's filter and the value
		{"/api/v1/jobs/" + c.job, adminToken, secretKey},
		{"/api/v1/failures/export", adminToken, secretKey},
	} {
		if r := c.do("GET", pc.path, pc.token, nil); len(leaks(r.body, []string{pc.secret})) == 0 {
			t.Errorf("control: GET %s does not show %q: %s", pc.path, pc.secret, r.body)
		}
	}
	// The repaired revision of a secure failure is masked by the failure's own topic, though
	// it went to "orders".
	r := c.do("GET", "/api/v1/failures/"+c.sec1.String()+"/revisions", adminToken, nil)
	if !strings.Contains(exposed(r.body), `"ssn":"`+strings.Repeat("*", len(secretMasked))+`"`) {
		t.Errorf("revision not masked by the failure's topic: %s", r.body)
	}
}

// probe is a pair of filters that differ only in a term: the secret and a wrong guess.
type probe struct {
	name          string
	secret, guess map[string]any
	// refusedFor: the classes the probe is refused for (a 403 naming field); others may
	// search it (their answers may differ).
	refusedFor []principalClass
	field      string
}

func confProbes() []probe {
	bounded := func(m map[string]any) map[string]any {
		m["created_from"] = time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
		m["created_to"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		return m
	}
	both := []principalClass{classNone, classMasked}
	none := []principalClass{classNone}
	return []probe{
		{"payload of the masked topic", map[string]any{"topic": "secure", "payload": secretMasked},
			map[string]any{"topic": "secure", "payload": guessMasked}, both, "payload"},
		{"payload of every topic", bounded(map[string]any{"payload": secretMasked[4:]}),
			bounded(map[string]any{"payload": guessMasked[4:]}), both, "payload"},
		{"masked header value", map[string]any{"header": "x-secret=" + secretMasked},
			map[string]any{"header": "x-secret=" + guessMasked}, both, "header"},
		{"masked header value of the topic", map[string]any{"topic": "secure", "header": "x-secret=" + secretMasked},
			map[string]any{"topic": "secure", "header": "x-secret=" + guessMasked}, both, "header"},
		{"payload prefix of the masked topic", map[string]any{"topic": "secure", "payload": `"ssn":"SSN-7`},
			map[string]any{"topic": "secure", "payload": `"ssn":"SSN-0`}, both, "payload"},
		{"key", map[string]any{"key": secretKey}, map[string]any{"key": guessKey}, none, "key"},
		{"key prefix", map[string]any{"key_prefix": secretKey[:8]}, map[string]any{"key_prefix": guessKey[:8]}, none, "key_prefix"},
		{"key base64", map[string]any{"key_base64": base64.StdEncoding.EncodeToString([]byte(secretKey))},
			map[string]any{"key_base64": base64.StdEncoding.EncodeToString([]byte(guessKey))}, none, "key"},
		{"payload of an unmasked topic", map[string]any{"topic": "orders", "payload": secretPlain},
			map[string]any{"topic": "orders", "payload": guessPlain}, none, "payload"},
		{"unmasked header value", map[string]any{"header": "x-plain=hello"}, map[string]any{"header": "x-plain=nopes"}, none, "header"},
	}
}

func query(m map[string]any) string {
	v := url.Values{}
	for k, x := range m {
		v.Set(k, fmt.Sprint(x))
	}
	return v.Encode()
}

// Search, totals, export, bulk dry runs and job previews give the same answer for a secret
// and a wrong guess to every principal who may not see the secret: the criterion is refused
// with a 403 problem naming it, whatever the term; nothing is stored. A principal who may see
// the bytes gets real answers (the control).
func TestConfidentialitySearchIsNoOracle(t *testing.T) {
	t.Parallel()
	c := newConfEnv(t)
	type ask func(token string, filter map[string]any) *response
	asks := map[string]ask{
		"list total": func(tok string, f map[string]any) *response {
			return c.do("GET", "/api/v1/failures?total=true&"+query(f), tok, nil)
		},
		"export": func(tok string, f map[string]any) *response {
			return c.do("GET", "/api/v1/failures/export?"+query(f), tok, nil)
		},
		"dry run": func(tok string, f map[string]any) *response {
			return c.do("POST", "/api/v1/failures/retry", tok, map[string]any{"filter": f, "dry_run": true})
		},
		"job preview": func(tok string, f map[string]any) *response {
			return c.do("POST", "/api/v1/jobs", tok, map[string]any{"action": "close", "reason": "probe", "filter": f})
		},
	}
	for _, pr := range confProbes() {
		for _, p := range confPrincipals {
			refused := false
			for _, cl := range pr.refusedFor {
				refused = refused || cl == p.class
			}
			for name, do := range asks {
				if !refused {
					if a := do(p.token, pr.secret); a.status >= 400 && a.status != 403 {
						t.Errorf("%s, %s, %s: %d %s", pr.name, p.name, name, a.status, a.body)
					}
					continue
				}
				before := c.checksum()
				a, b := do(p.token, pr.secret), do(p.token, pr.guess)
				if c.checksum() != before {
					t.Errorf("%s, %s, %s: a refused search stored something", pr.name, p.name, name)
				}
				if a.status != b.status || !bytes.Equal(a.body, b.body) {
					t.Errorf("%s, %s, %s: the secret gets %d %s, the guess %d %s", pr.name, p.name, name, a.status, a.body, b.status, b.body)
				}
				if a.status != 403 {
					t.Errorf("%s, %s, %s: %d %s, want 403", pr.name, p.name, name, a.status, a.body)
					continue
				}
				if prob := a.problem(t); name == "list total" && prob.Field != pr.field {
					t.Errorf("%s, %s: problem names %q, want %q", pr.name, p.name, prob.Field, pr.field)
				}
			}
		}
	}
	// Controls: who may see the bytes finds them.
	for _, pc := range []struct {
		token string
		q     string
	}{
		{viewerToken, "key=" + secretKey},
		{viewerToken, "topic=orders&payload=" + secretPlain},
		{viewerToken, "header=x-plain%3Dhello"},
	} {
		var got struct {
			Total struct {
				Count int64 `json:"count"`
			} `json:"total"`
		}
		c.do("GET", "/api/v1/failures?total=true&"+pc.q, pc.token, nil).json(t, &got)
		if got.Total.Count == 0 {
			t.Errorf("control %s: total 0", pc.q)
		}
	}
	// A header name alone is not payload: names are shown to every reader.
	if r := c.do("GET", "/api/v1/failures?total=true&header=x-secret", noPayloadToken, nil); r.status != 200 {
		t.Errorf("header name search = %d %s", r.status, r.body)
	}
}
