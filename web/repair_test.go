package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/operator"
)

func TestRepairPage(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, fixtureOptions{resend: true, web: func(c *Config) { c.RepairRole = auth.RoleOperator }})
	id := f.ids[0].String() // {"order":1}, permanent
	page := "/failures/" + id + "/repair"

	viewer := f.client()
	viewer.login(viewerToken)
	_, body := viewer.do("GET", page, nil)
	if strings.Contains(body, `id="repair-form"`) || !strings.Contains(body, `id="repair-role"`) {
		t.Errorf("a viewer is offered the repair form")
	}
	tok := viewer.csrf(page)
	if resp, _ := viewer.do("POST", page, url.Values{"csrf": {tok}, "value_format": {"json"}, "value": {`{"order":9}`},
		"reason": {"x"}, "target_topic": {"orders"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's repair = %d, want 403", resp.StatusCode)
	}

	op := f.client()
	op.login(operatorToken)
	_, body = op.do("GET", page, nil)
	mustContain(t, "repair page", body, `id="repair-form"`, `<option value="json" selected>`, "&#34;order&#34;: 1", "No repairs yet.")
	tok = op.csrf(page)

	// Invalid JSON: the page again, with the error and the edit kept; nothing stored or sent.
	resp, body := op.do("POST", page, url.Values{"csrf": {tok}, "value_format": {"json"}, "value": {`{"order":`},
		"headers": {"trace: abc\n"}, "reason": {"fix the order"}, "target_topic": {"orders"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="repair-error"`) || !strings.Contains(body, "{&#34;order&#34;:") {
		t.Fatalf("invalid JSON repair = %d without the error or the edit:\n%s", resp.StatusCode, body)
	}
	if revs, _ := f.core.Revisions(context.Background(), f.ids[0], operator.Reader{Payload: true}); len(revs) != 0 {
		t.Fatalf("a refused repair stored %d revisions", len(revs))
	}

	// A good edit: stored as a revision, resent, and shown with its diff.
	resp, _ = op.do("POST", page, url.Values{"csrf": {tok}, "value_format": {"json"}, "value": {"{\r\n  \"order\": 2\r\n}"},
		"headers": {"trace: abc\nnullh\n"}, "reason": {"fix the order"}, "target_topic": {"orders"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, page+"?revision=") {
		t.Fatalf("repair = %d to %q", resp.StatusCode, loc)
	}
	_, body = op.do("GET", loc, nil)
	mustContain(t, "repair result", body, `class="shown"`, "fix the order", `<span class="diff-del">- {&#34;order&#34;:1}</span>`,
		`<span class="diff-add">&#43;   &#34;order&#34;: 2</span>`, "olivia")
	if st := f.state(f.ids[0]); st != redrive.StateResent {
		t.Errorf("state after the repair = %s, want resent", st)
	}
	rec := f.kafka.ConsumeN(t, "orders", 1, 30*time.Second)
	if string(rec[0].Value) != "{\n  \"order\": 2\n}" {
		t.Errorf("resent value = %q", rec[0].Value)
	}

	// Now the failure is resent: no more form.
	_, body = op.do("GET", page, nil)
	if strings.Contains(body, `id="repair-form"`) {
		t.Errorf("a resent failure is offered the repair form")
	}
}

func TestLineDiff(t *testing.T) {
	d, note := lineDiff([]byte("a\nb\nc"), []byte("a\nx\nc\nd"))
	var got []string
	for _, l := range d {
		got = append(got, l.Op+segText(l.Text))
	}
	if note != "" || strings.Join(got, "|") != " a|-b|+x| c|+d" {
		t.Errorf("diff = %q (%q)", got, note)
	}
	if _, note := lineDiff([]byte{0xff}, []byte("x")); !strings.Contains(note, "Binary") {
		t.Errorf("binary note = %q", note)
	}
	if _, note := lineDiff([]byte("x"), nil); !strings.Contains(note, "tombstone") {
		t.Errorf("tombstone note = %q", note)
	}
}
