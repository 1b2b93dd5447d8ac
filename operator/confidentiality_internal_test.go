package operator

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/masking"
)

func confCore(t *testing.T) *Core {
	t.Helper()
	rules, err := masking.Parse(strings.NewReader("secure json /ssn\nsecure header x-secret\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	return &Core{cfg: Config{Masking: rules}}
}

// The filter policy: which criteria each reader may search by, and a refusal that names the
// criterion and never the term.
func TestCheckFilter(t *testing.T) {
	t.Parallel()
	c := confCore(t)
	const term = "s3cr3t-term"
	none, payload := Reader{Principal: "nina"}, Reader{Principal: "vera", Payload: true}
	for _, tc := range []struct {
		name   string
		f      redrive.Filter
		reader Reader
		field  string // "" allowed
	}{
		{"key without payload", redrive.Filter{Key: []byte(term)}, none, ParamKey},
		{"key prefix without payload", redrive.Filter{KeyPrefix: []byte(term)}, none, ParamKeyPrefix},
		{"payload without payload", redrive.Filter{Topic: "orders", Payload: []byte(term)}, none, ParamPayload},
		{"header value without payload", redrive.Filter{HeaderName: "x-plain", HeaderValue: []byte(term)}, none, ParamHeader},
		{"header name without payload", redrive.Filter{HeaderName: "x-secret"}, none, ""},
		{"metadata without payload", redrive.Filter{Topic: "secure", ErrorCode: "X", TraceID: "0af7651916cd43dd8448eb211c80319c"}, none, ""},
		{"key with payload", redrive.Filter{Key: []byte(term)}, payload, ""},
		{"payload of an unmasked topic", redrive.Filter{Topic: "orders", Payload: []byte(term)}, payload, ""},
		{"payload of a masked topic", redrive.Filter{Topic: "secure", Payload: []byte(term)}, payload, ParamPayload},
		{"payload of every topic", redrive.Filter{Payload: []byte(term)}, payload, ParamPayload},
		{"masked header on its topic", redrive.Filter{Topic: "secure", HeaderName: "X-Secret", HeaderValue: []byte(term)}, payload, ParamHeader},
		{"masked header on every topic", redrive.Filter{HeaderName: "x-secret", HeaderValue: []byte(term)}, payload, ParamHeader},
		{"masked header name elsewhere", redrive.Filter{Topic: "orders", HeaderName: "x-secret", HeaderValue: []byte(term)}, payload, ""},
		{"unmasked header value", redrive.Filter{HeaderName: "x-plain", HeaderValue: []byte(term)}, payload, ""},
	} {
		err := c.checkFilter(tc.f, tc.reader)
		var ie *InputError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.field == "":
		case !errors.As(err, &ie) || ie.Field != tc.field || ie.Status() != http.StatusForbidden || !errors.Is(err, redrive.ErrPayloadForbidden):
			t.Errorf("%s: %v, want a 403 on %s", tc.name, err, tc.field)
		case strings.Contains(err.Error(), term):
			t.Errorf("%s: the refusal shows the term: %v", tc.name, err)
		}
	}
}

// Described filters (a job's selection, an audit entry's details, nested or not) hide the
// terms that could hold payload bytes from readers who may not see them.
func TestRedactDetails(t *testing.T) {
	t.Parallel()
	c := confCore(t)
	desc := describeFilter(redrive.Filter{Topic: "secure", Key: []byte("k-secret"), KeyPrefix: []byte("k-"),
		Payload: []byte("p-secret"), HeaderName: "x-secret", HeaderValue: []byte("h-secret"), ErrorCode: "E"})
	details := map[string]any{"job_id": "j", "selection": map[string]any{"filter": desc}}
	for _, tc := range []struct {
		name      string
		reader    Reader
		shown     []string
		hidden    []string
		anyHidden bool
	}{
		{"no payload", Reader{}, []string{"secure", "E", "x-secret="}, []string{"k-secret", "k-", "p-secret", "h-secret"}, true},
		{"payload, masked topic", Reader{Payload: true}, []string{"k-secret", "k-"}, []string{"p-secret", "h-secret"}, true},
	} {
		got, hid := c.redactDetails(details, tc.reader)
		f := got["selection"].(map[string]any)["filter"].(map[string]any)
		if hid != tc.anyHidden {
			t.Errorf("%s: hid = %v", tc.name, hid)
		}
		all := ""
		for _, v := range f {
			all += v.(string) + "|"
		}
		for _, s := range tc.hidden {
			if strings.Contains(all, s+"|") || strings.Contains(all, "="+s) {
				t.Errorf("%s: %q shown in %v", tc.name, s, f)
			}
		}
		for _, s := range tc.shown {
			if !strings.Contains(all, s) {
				t.Errorf("%s: %q not shown in %v", tc.name, s, f)
			}
		}
	}
	if desc[ParamKey] != "k-secret" {
		t.Error("redaction changed the original description")
	}
	// Without masking rules, the payload permission shows every term.
	plain := &Core{}
	if _, hid := plain.redactDetails(details, Reader{Payload: true}); hid {
		t.Error("terms hidden from a reader who may see them")
	}
}

// A revision is masked by the rules of the failure's own topic even when it went to an
// unmasked topic, and shows no bytes without the payload permission.
func TestRevisionView(t *testing.T) {
	t.Parallel()
	c := confCore(t)
	rev := redrive.Revision{TargetTopic: "orders", Key: []byte("k"), Value: []byte(`{"ssn":"123-45"}`),
		Headers: []avro.Header{{Name: "x-secret", Value: []byte("h")}}}
	got := c.revisionView(rev, "secure", Reader{Payload: true})
	if string(got.Value) != `{"ssn":"******"}` || string(got.Headers[0].Value) != "*" || string(got.Key) != "k" {
		t.Errorf("masked revision = %s %s %s", got.Key, got.Value, got.Headers[0].Value)
	}
	if string(rev.Value) != `{"ssn":"123-45"}` {
		t.Error("the stored revision was changed")
	}
	hidden := c.revisionView(rev, "secure", Reader{})
	if hidden.Key != nil || hidden.Value != nil || hidden.Headers[0].Value != nil || hidden.Headers[0].Name != "x-secret" {
		t.Errorf("hidden revision = %+v", hidden)
	}
}
