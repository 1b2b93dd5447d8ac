package web

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
)

func TestActionsNeedOperatorAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, fixtureOptions{resend: true})
	viewer := f.client()
	viewer.login(viewerToken)
	tok := viewer.csrf("/failures")
	form := url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"x"}}
	if resp, _ := viewer.do("POST", "/failures/close", form); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer close: %d", resp.StatusCode)
	}

	op := f.client()
	op.login(operatorToken)
	form = url.Values{"id": {f.ids[0].String()}, "reason": {"x"}}
	if resp, _ := op.do("POST", "/failures/close", form); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("close without CSRF token: %d", resp.StatusCode)
	}
	form.Set("csrf", tok) // another session's token
	if resp, _ := op.do("POST", "/failures/close", form); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("close with another session's token: %d", resp.StatusCode)
	}
	tok = op.csrf("/failures")
	form.Set("csrf", tok)
	op.hdr.Set("Sec-Fetch-Site", "cross-site")
	if resp, _ := op.do("POST", "/failures/close", form); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site close: %d", resp.StatusCode)
	}
	op.hdr.Del("Sec-Fetch-Site")
	if st := f.state(f.ids[0]); st != redrive.StatePermanent {
		t.Fatalf("a refused close changed the state to %s", st)
	}

	// Confirmation with the dry-run count, then a close that needs a reason.
	resp, body := op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"close"}, "id": {f.ids[0].String(), f.ids[3].String()}})
	if resp.StatusCode != 200 || !strings.Contains(body, `<strong id="affected-count">1</strong> of the 2 selected`) ||
		!strings.Contains(body, f.ids[3].String()) || !strings.Contains(body, "RESENT") {
		t.Fatalf("confirm: %d %s", resp.StatusCode, body)
	}
	if st := f.state(f.ids[0]); st != redrive.StatePermanent {
		t.Fatalf("the dry run changed the state to %s", st)
	}
	resp, body = op.do("POST", "/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"  "}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="confirm-error">reason: required`) || !strings.Contains(body, `id="confirm-form"`) {
		t.Fatalf("close without reason: %d %s", resp.StatusCode, body)
	}
	resp, body = op.act("/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"duplicate order"}})
	if resp.StatusCode != 200 || !strings.Contains(body, `<strong id="done-count">1</strong> closed`) {
		t.Fatalf("close: %d %s", resp.StatusCode, body)
	}
	_, body = op.do("GET", "/failures/"+f.ids[0].String(), nil)
	if !strings.Contains(body, "CLOSED") || !strings.Contains(body, "duplicate order") || !strings.Contains(body, "olivia") {
		t.Fatal("the detail does not show the close and its audit entry")
	}

	// All matching the filter: counted by a dry run, then resent through the resender.
	resp, body = op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"retry"}, "scope": {"all"}, "topic": {"shipments"}})
	if resp.StatusCode != 200 || !strings.Contains(body, `matches <strong id="affected-count">1</strong>`) ||
		!strings.Contains(body, `name="topic" value="shipments"`) {
		t.Fatalf("confirm all: %d %s", resp.StatusCode, body)
	}
	resp, body = op.act("/failures/retry", url.Values{"csrf": {tok}, "scope": {"all"}, "topic": {"shipments"}, "reason": {"fixed"}})
	if resp.StatusCode != 200 || !strings.Contains(body, `<strong id="done-count">1</strong> resent`) {
		t.Fatalf("retry all: %d %s", resp.StatusCode, body)
	}
	if st := f.state(f.ids[2]); st != redrive.StateResent {
		t.Fatalf("the retried failure is %s", st)
	}
	msgs := f.kafka.ConsumeN(t, "shipments", 1, 30*time.Second)
	if !bytes.Equal(msgs[0].Value, []byte{0x00, 0xff, 'h', 'i', 0x1b}) || string(msgs[0].Key) != "key-shipments" {
		t.Fatalf("republished key %q value %q", msgs[0].Key, msgs[0].Value)
	}
}

// The UI follows the core's rules, as the API does: an action by filter needs a criterion and
// may act on at most MaxBulk failures, and the result names every failure not changed.
func TestActionRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/failures")

	// No filter: refused, at the confirmation already, with the core's message.
	for _, path := range []string{"/failures/confirm", "/failures/close"} {
		resp, body := op.do("POST", path, url.Values{"csrf": {tok}, "action": {"close"}, "scope": {"all"}, "reason": {"all of them"}})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "filter: empty: an action by filter needs at least one criterion") {
			t.Errorf("%s with no filter: %d %s", path, resp.StatusCode, body)
		}
	}
	// Nothing selected.
	resp, body := op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"close"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "ids: empty") {
		t.Errorf("confirm of nothing: %d %s", resp.StatusCode, body)
	}
	// Not an action.
	resp, body = op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"delete"}, "id": {f.ids[0].String()}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "is not retry or close") {
		t.Errorf("confirm of delete: %d %s", resp.StatusCode, body)
	}
	// A retry on a server that does not resend.
	resp, _ = op.do("POST", "/failures/retry", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}})
	if resp.StatusCode != http.StatusServiceUnavailable || f.state(f.ids[0]) != redrive.StatePermanent {
		t.Errorf("retry without a resender: %d", resp.StatusCode)
	}
	_, body = op.do("GET", "/failures/"+f.ids[0].String(), nil)
	if strings.Contains(body, `id="retry"`) || !strings.Contains(body, `id="close"`) {
		t.Error("the detail offers a retry that this server cannot do, or no close")
	}

	// Over the bulk cap (2): the dry run counts them, the action is not offered, and a posted
	// one is refused with the core's message, changing nothing.
	over := url.Values{"csrf": {tok}, "action": {"close"}, "scope": {"all"}, "state": {"PERMANENT", "RETRY_PENDING"}, "reason": {"too many"}}
	resp, body = op.do("POST", "/failures/confirm", over)
	if resp.StatusCode != 200 || !strings.Contains(body, `<strong id="affected-count">3</strong>`) || !strings.Contains(body, `id="over-cap"`) ||
		strings.Contains(body, `id="confirm-form"`) {
		t.Fatalf("confirm over the cap: %d %s", resp.StatusCode, body)
	}
	resp, body = op.do("POST", "/failures/close", over)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "selects more than 2 failures") {
		t.Fatalf("close over the cap: %d %s", resp.StatusCode, body)
	}
	for _, i := range []int{0, 1, 2} {
		if st := f.state(f.ids[i]); st == redrive.StateClosed {
			t.Fatalf("a refused bulk close closed failure %d", i)
		}
	}

	// A close of a mix: the result counts every outcome and shows each failure not closed
	// with its state before and after and why.
	unknown := uuid.New()
	resp, body = op.act("/failures/close", url.Values{"csrf": {tok}, "reason": {"cleanup"},
		"id": {f.ids[1].String(), f.ids[3].String(), unknown.String()}})
	if resp.StatusCode != 200 {
		t.Fatalf("mixed close: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`<strong id="done-count">1</strong> closed`,
		`<strong id="count-conflict">1</strong>`,
		`<strong id="count-not_found">1</strong>`,
		`<a href="/failures/` + f.ids[3].String() + `">`,
		`<a href="/failures/` + unknown.String() + `">`,
		`<span class="state state-resent">RESENT</span></td>
      <td><span class="state state-resent">RESENT</span></td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("result lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, `<a href="/failures/`+f.ids[1].String()+`">`) {
		t.Error("the result lists a failure that was closed among those that were not")
	}
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE reason = 'cleanup'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d audit entries for the mixed close (%v), want 1: refused ones get none", n, err)
	}
}
