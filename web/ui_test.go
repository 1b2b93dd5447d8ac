package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"

	"github.com/redrive/redrive/resend"
)

// TestBrowser drives headless Chromium against the service on a database seeded through the
// intake: MPFEs produced to the error topic, consumed and stored.
func TestBrowser(t *testing.T) {
	startBrowser(t) // fail fast without a browser
	s := newService(t)
	s.seedAll()
	base := s.srv.URL

	t.Run("LoginAndOverview", func(t *testing.T) {
		ctx := tab(t)
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("token")))
		screenshot(t, ctx, "login.png")
		do(t, ctx, chromedp.SendKeys(chromedp.ID("token"), "not-a-valid-token-123"))
		clickAndWait(t, ctx, "#sign-in")
		if msg := text(t, ctx, "#login-error"); !strings.Contains(msg, "not valid") {
			t.Fatalf("login error = %q", msg)
		}
		do(t, ctx, chromedp.SendKeys(chromedp.ID("token"), svcOperatorToken))
		clickAndWait(t, ctx, "#sign-in")
		if loc := run(t, ctx, chromedp.Location()); loc != base+"/failures" {
			t.Fatalf("after login at %s, want the page asked for first", loc)
		}
		if who := text(t, ctx, "#principal") + "/" + text(t, ctx, "#role"); who != "olivia/operator" {
			t.Fatalf("signed in as %q", who)
		}
		if js := eval[bool](t, ctx, `document.cookie.includes("redrive_auth")`); js {
			t.Fatal("the session cookie is readable by scripts")
		}
		do(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
		open := len(s.seedList) // every seeded failure is open (RETRY_PENDING or PERMANENT)
		if got := text(t, ctx, "#open-count"); got != strconv.Itoa(open) {
			t.Errorf("open count %s, want %d", got, open)
		}
		if bars := eval[float64](t, ctx, `Array.from(document.querySelectorAll("svg.chart rect.bar")).filter(r => +r.getAttribute("height") > 0).length`); bars < 1 {
			t.Error("the chart shows no bar")
		}
		if got := text(t, ctx, "#h-topics + table tbody tr:first-child td:first-child"); got != ordersTopic {
			t.Errorf("top topic %q, want %q", got, ordersTopic)
		}
		screenshot(t, ctx, "overview.png")
	})

	t.Run("ListAndFilters", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcOperatorToken)
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("failures")))
		if n := eval[float64](t, ctx, `document.querySelectorAll("#failures tbody tr[data-id]").length`); int(n) != len(s.seedList) {
			t.Fatalf("the list shows %v rows, want %d", n, len(s.seedList))
		}
		screenshot(t, ctx, "failures.png")

		do(t, ctx, chromedp.SendKeys(chromedp.ID("f-topic"), paymentsTopic))
		clickAndWait(t, ctx, "#apply-filter")
		loc := run(t, ctx, chromedp.Location())
		if !strings.Contains(loc, "topic="+paymentsTopic) || strings.Contains(loc, "message_type=") {
			t.Fatalf("the filter is not in the address (or empty fields are): %s", loc)
		}
		want := 0
		for _, sd := range s.seedList {
			if sd.event.References.Message.TopicName == paymentsTopic {
				want++
			}
		}
		if n := eval[float64](t, ctx, `document.querySelectorAll("#failures tbody tr[data-id]").length`); int(n) != want {
			t.Fatalf("filtered by topic: %v rows, want %d", n, want)
		}
		do(t, ctx, chromedp.Click(chromedp.CSS(`input[name="state"][value="PERMANENT"]`)))
		clickAndWait(t, ctx, "#apply-filter")
		loc = run(t, ctx, chromedp.Location())
		if n := eval[float64](t, ctx, `document.querySelectorAll("#failures tbody tr[data-id]").length`); n != 1 {
			t.Fatalf("filtered by topic and state: %v rows, want 1 (the Avro one)", n)
		}
		if got := eval[string](t, ctx, `document.querySelector("#failures tbody tr[data-id]").dataset.id`); got != s.seeded["avro"].id.String() {
			t.Fatalf("the row is %s, want the Avro failure", got)
		}

		// The shared link reopens the same list, and the last filter is offered back.
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("restore-filter")))
		clickAndWait(t, ctx, "#restore-filter")
		if restored := run(t, ctx, chromedp.Location()); restored != loc {
			t.Fatalf("restored filter %s, want %s", restored, loc)
		}

		// All matching the filter: the confirmation counts them (a dry run) before anything happens.
		do(t, ctx, chromedp.Navigate(base+"/failures?publisher_service=payments"), chromedp.WaitVisible(chromedp.ID("scope-all")),
			chromedp.Click(chromedp.ID("scope-all")))
		clickAndWait(t, ctx, "#bulk-retry")
		if got := text(t, ctx, "#affected-count"); got != "6" {
			t.Fatalf("dry run counts %s, want 6 (the binary one and five bulk ones)", got)
		}
		screenshot(t, ctx, "confirm.png")
		clickAndWait(t, ctx, "#cancel")
		if n := countState(t, s, redrive.StateResent); n != 0 {
			t.Fatalf("a cancelled action resent %d failures", n)
		}

		// Selected rows: two checkboxes, then close with a reason.
		do(t, ctx, chromedp.WaitVisible(chromedp.ID("failures")),
			chromedp.Click(chromedp.CSS("#failures tbody tr:nth-child(1) input.row-select")),
			chromedp.Click(chromedp.CSS("#failures tbody tr:nth-child(2) input.row-select")))
		waitUntil(t, ctx, "the selection count to reach 2", `document.getElementById("selected-count").textContent === "2"`)
		ids := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("input.row-select:checked")).map(i => i.value)`)
		clickAndWait(t, ctx, "#bulk-close")
		if got := text(t, ctx, "#affected-count"); got != "2" {
			t.Fatalf("dry run of the selection counts %s, want 2", got)
		}
		do(t, ctx, chromedp.SendKeys(chromedp.ID("reason"), "card provider incident INC-5, payments re-entered by hand"))
		clickAndWait(t, ctx, "#confirm")
		if got := text(t, ctx, "#done-count"); got != "2" {
			t.Fatalf("closed %s, want 2", got)
		}
		for _, id := range ids {
			if st := s.state(mustUUID(t, id)); st != redrive.StateClosed {
				t.Errorf("%s is %s after the bulk close", id, st)
			}
		}
	})

	t.Run("DetailPayloadViews", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcViewerToken)
		do(t, ctx, chromedp.Navigate(base+"/failures/"+s.seeded["json"].id.String()), chromedp.WaitVisible(chromedp.ID("view-json")))
		if got := text(t, ctx, "#view-json pre"); !strings.Contains(got, "\"orderId\": 11,\n  \"items\": [") {
			t.Fatalf("JSON view:\n%s", got)
		}
		waitUntil(t, ctx, "the script to hide the hex view while the JSON tab is selected", `document.getElementById("view-hex").hidden`)
		do(t, ctx, chromedp.Click(chromedp.ID("tab-hex")), chromedp.WaitVisible(chromedp.ID("view-hex")))
		hex := text(t, ctx, "#view-hex pre.hex")
		if !strings.Contains(hex, "00000000  7b 22 6f 72 64 65 72 49  64 22 3a 31 31 2c 22 69  |{\"orderId\":11,\"i|") {
			t.Fatalf("hex view:\n%s", hex)
		}
		if got := eval[float64](t, ctx, `document.querySelectorAll("#headers tbody tr").length`); got != 6 {
			t.Fatalf("%v headers shown, want 6 (order, duplicates, empty and null kept)", got)
		}
		if got := text(t, ctx, "#headers tbody tr:nth-child(6) td:nth-child(3)"); got != "null" {
			t.Errorf("null header shows %q", got)
		}
		if got := text(t, ctx, "#headers tbody tr:nth-child(4) td:nth-child(2)") + "=" + text(t, ctx, "#headers tbody tr:nth-child(4) .hv"); got != "dup=second" {
			t.Errorf("fourth header %q, want dup=second", got)
		}
		if !strings.Contains(text(t, ctx, "#stack-trace"), "at com.example.Handler.handle(Handler.java:42)") {
			t.Error("no stack trace")
		}
		waitUntil(t, ctx, "the script to show the copy button", `!document.querySelector("[data-copy]").hidden`)
		if eval[bool](t, ctx, `document.getElementById("retry") !== null`) {
			t.Error("a viewer sees the retry button")
		}
		do(t, ctx, chromedp.Click(chromedp.ID("tab-json")))
		screenshot(t, ctx, "failure.png")

		// Bytes that are not text: hex first, escapes in the text view.
		do(t, ctx, chromedp.Navigate(base+"/failures/"+s.seeded["binary"].id.String()), chromedp.WaitVisible(chromedp.ID("view-hex")))
		if got := text(t, ctx, "#view-hex pre.hex"); !strings.Contains(got, "00 01 02 1b 7f ff fe 63  61 72 64 3d 34 31 31 31  |.......card=4111|") {
			t.Fatalf("hex view of binary value:\n%s", got)
		}
		do(t, ctx, chromedp.Click(chromedp.ID("tab-text")), chromedp.WaitVisible(chromedp.ID("view-text")))
		if got := text(t, ctx, "#view-text pre.text"); !strings.HasPrefix(got, `\x00\x01\x02\x1b\x7f\xff\xfecard=4111\x0d`) || !strings.Contains(got, `\u202eevil`) {
			t.Fatalf("text view of binary value: %q", got)
		}
		if got := text(t, ctx, "#key-null"); !strings.Contains(got, "null") {
			t.Errorf("null key shows %q", got)
		}
		screenshot(t, ctx, "failure-binary.png")

		// An Avro value in single-object encoding, with a schema the UI knows.
		do(t, ctx, chromedp.Navigate(base+"/failures/"+s.seeded["avro"].id.String()), chromedp.WaitVisible(chromedp.ID("view-decoded")))
		if got := text(t, ctx, "#view-decoded pre"); !strings.Contains(got, `"amount_cents": 1999`) || !strings.Contains(got, `"currency": "CHF"`) {
			t.Fatalf("Avro view:\n%s", got)
		}

		// The attempt chain of a message that failed twice.
		do(t, ctx, chromedp.Navigate(base+"/failures/"+s.seeded["chain-2"].id.String()), chromedp.WaitVisible(chromedp.ID("chain")))
		if got := eval[float64](t, ctx, `document.querySelectorAll("#chain li").length`); got != 2 {
			t.Fatalf("the chain has %v attempts, want 2", got)
		}
		if got := text(t, ctx, "#chain li.current .what"); !strings.HasPrefix(got, "Attempt 2") {
			t.Fatalf("the current attempt reads %q", got)
		}
	})

	t.Run("ScriptPayloadIsNotExecuted", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcOperatorToken)
		id := s.seeded["script"].id.String()
		for _, path := range []string{"/failures?q=onerror", "/failures/" + id} {
			do(t, ctx, chromedp.Navigate(base+path), chromedp.WaitReady(chromedp.CSS("body")))
			if got := eval[string](t, ctx, `String(window.__xss)`); got != "undefined" {
				t.Fatalf("%s: the payload ran (window.__xss = %s)", path, got)
			}
			if n := eval[float64](t, ctx, `document.scripts.length + document.images.length`); n != 1 {
				t.Fatalf("%s: the page has %v scripts and images, want only app.js", path, n)
			}
		}
		do(t, ctx, chromedp.Click(chromedp.ID("tab-text")))
		if got := text(t, ctx, "#view-text pre.text"); got != `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">` {
			t.Fatalf("the payload is not shown as text: %q", got)
		}
		if got := text(t, ctx, "#error-message"); got != `bad <img src=x onerror="window.__xss=3"> input` {
			t.Fatalf("error message %q", got)
		}
	})

	t.Run("RetryRepublishesTheOriginal", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcOperatorToken)
		sd := s.seeded["retry"]
		do(t, ctx, chromedp.Navigate(base+"/failures/"+sd.id.String()), chromedp.WaitVisible(chromedp.ID("retry")))
		clickAndWait(t, ctx, "#retry")
		if got := text(t, ctx, "#affected-count"); got != "1" {
			t.Fatalf("dry run counts %s", got)
		}
		do(t, ctx, chromedp.SendKeys(chromedp.ID("reason"), "lock released"))
		clickAndWait(t, ctx, "#confirm")
		if got := text(t, ctx, "#done-count"); got != "1" {
			t.Fatalf("resent %s, want 1: %s", got, text(t, ctx, "#result"))
		}
		clickAndWait(t, ctx, "#back-to-failure")
		if got := text(t, ctx, "#state"); got != "RESENT" {
			t.Fatalf("state after retry: %s", got)
		}
		if got := lastActionRow(t, ctx); !strings.Contains(got, "retry") || !strings.Contains(got, "olivia") || !strings.Contains(got, "lock released") {
			t.Fatalf("audit entry: %q", got)
		}
		if eval[bool](t, ctx, `document.getElementById("retry") !== null`) {
			t.Error("a RESENT failure still offers retry")
		}

		msgs := s.kafka.ConsumeN(t, ordersTopic, 1, 2*time.Minute)
		m := msgs[0]
		if !bytes.Equal(m.Key, sd.event.Payload.OriginalKey) || !bytes.Equal(m.Value, sd.event.Payload.OriginalMessage) {
			t.Fatalf("republished key %q value %q, want %q %q", m.Key, m.Value, sd.event.Payload.OriginalKey, sd.event.Payload.OriginalMessage)
		}
		d, err := s.store.FailureByID(context.Background(), sd.id)
		if err != nil {
			t.Fatal(err)
		}
		want := resend.ResendHeaders(sd.headers, "billing", "redrive-test", d.CausingMessage)
		if len(m.Headers) != len(want) {
			t.Fatalf("republished %d headers, want %d: %v", len(m.Headers), len(want), m.Headers)
		}
		for i := range want {
			if m.Headers[i].Key != want[i].Key || !bytes.Equal(m.Headers[i].Value, want[i].Value) || (m.Headers[i].Value == nil) != (want[i].Value == nil) {
				t.Errorf("header %d = %s=%q, want %s=%q", i, m.Headers[i].Key, m.Headers[i].Value, want[i].Key, want[i].Value)
			}
		}
	})

	t.Run("CloseNeedsAReasonAndIsAudited", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcOperatorToken)
		id := s.seeded["close"].id
		do(t, ctx, chromedp.Navigate(base+"/failures/"+id.String()), chromedp.WaitVisible(chromedp.ID("close")))
		clickAndWait(t, ctx, "#close")
		// The browser refuses to send the form without a reason...
		do(t, ctx, chromedp.Click(chromedp.ID("confirm")))
		if !eval[bool](t, ctx, `document.getElementById("reason").matches(":invalid")`) || !strings.HasSuffix(run(t, ctx, chromedp.Location()), "/failures/confirm") {
			t.Fatal("the confirmation went through without a reason")
		}
		// ...and so does the server, when a form comes without one.
		do(t, ctx, chromedp.RemoveAttribute(chromedp.ID("reason"), "required"))
		clickAndWait(t, ctx, "#confirm")
		if got := text(t, ctx, "#confirm-error"); !strings.Contains(got, "reason: required") {
			t.Fatalf("server-side check: %q", got)
		}
		if st := s.state(id); st != redrive.StatePermanent {
			t.Fatalf("closed without a reason: %s", st)
		}
		do(t, ctx, chromedp.SendKeys(chromedp.ID("reason"), "OrderCancelled is handled by the cancellation service"))
		clickAndWait(t, ctx, "#confirm")
		clickAndWait(t, ctx, "#back-to-failure")
		if got := text(t, ctx, "#state"); got != "CLOSED" {
			t.Fatalf("state after close: %s", got)
		}
		if got := text(t, ctx, "#closed-reason"); got != "OrderCancelled is handled by the cancellation service" {
			t.Fatalf("closed reason %q", got)
		}
		if got := lastActionRow(t, ctx); !strings.Contains(got, "close") || !strings.Contains(got, "olivia") {
			t.Fatalf("audit entry: %q", got)
		}
		var action, principal, reason string
		if err := s.pool.QueryRow(context.Background(), `SELECT action, principal, reason FROM audit_log WHERE failure_id = $1 AND action = 'close'`, id).
			Scan(&action, &principal, &reason); err != nil {
			t.Fatal(err)
		}
		if action != redrive.AuditActionClose || principal != "token:olivia" || reason != "OrderCancelled is handled by the cancellation service" {
			t.Fatalf("audit_log row: %s %s %q", action, principal, reason)
		}
	})

	t.Run("ViewerCannotAct", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcViewerToken)
		id := s.seeded["viewer"].id.String()
		do(t, ctx, chromedp.Navigate(base+"/failures/"+id), chromedp.WaitVisible(chromedp.ID("state")))
		if eval[bool](t, ctx, `document.querySelector("#retry, #close, #actions") !== null`) {
			t.Fatal("a viewer sees action buttons on the detail")
		}
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("failures")))
		if eval[bool](t, ctx, `document.querySelector("#bulk-retry, #bulk-close, input.row-select, #select-all") !== null`) {
			t.Fatal("a viewer sees the bulk actions")
		}
		do(t, ctx, chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(chromedp.CSS("section.group")))
		if eval[bool](t, ctx, `document.querySelector("details.edit") !== null`) {
			t.Fatal("a viewer can edit groups")
		}
		// A POST forged in the page, with the viewer's own valid CSRF token, is refused for the role.
		status := run(t, ctx, chromedp.Evaluate[float64](fmt.Sprintf(`fetch("/failures/retry", {method: "POST", body: new URLSearchParams({
			csrf: document.querySelector('input[name="csrf"]').value, id: %q})}).then(r => r.status)`, id), chromedp.EvalAwaitPromise))
		if status != http.StatusForbidden {
			t.Fatalf("forged retry by a viewer: %v", status)
		}
		if st := s.state(s.seeded["viewer"].id); st != redrive.StatePermanent {
			t.Fatalf("the viewer's forged retry changed the state to %s", st)
		}
	})

	t.Run("ForgedCrossSitePostIsRefused", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcOperatorToken) // an operator, who may retry
		id := s.seeded["viewer"].id.String()
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<form id="f" method="post" action="%s/failures/retry"><input name="id" value="%s"><input name="csrf" value="guessed"></form>
				<script>document.getElementById("f").submit()</script>`, base, id)
		}))
		defer evil.Close()
		do(t, ctx, chromedp.Navigate(evil.URL))
		// The evil page submits its form when it loads: wait for the answer to arrive.
		waitUntil(t, ctx, "the forged POST's answer", fmt.Sprintf(`location.href.startsWith(%q) && document.getElementById("error-message") !== null`, base))
		t.Logf("forged POST answered %q", text(t, ctx, "#error-message"))
		// SameSite=Strict keeps the cookies off a cross-site request; a same-site one (another
		// port) carries them but no CSRF token.
		if got := text(t, ctx, "#error-message"); !strings.Contains(got, "did not come from this site") && !strings.Contains(got, "sign in") {
			t.Fatalf("forged POST answered %q", got)
		}
		if st := s.state(s.seeded["viewer"].id); st != redrive.StatePermanent {
			t.Fatalf("the forged retry changed the state to %s", st)
		}
	})

	t.Run("Groups", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcOperatorToken)
		do(t, ctx, chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(chromedp.CSS("section.group")))
		var gid int64
		if err := s.pool.QueryRow(context.Background(), `SELECT group_id FROM failures WHERE id = $1`, s.seeded["chain-1"].id).Scan(&gid); err != nil {
			t.Fatal(err)
		}
		sel := fmt.Sprintf("#group-%d", gid)
		if got := text(t, ctx, sel+" .open-count"); got != "2" {
			t.Fatalf("group open count %s, want 2", got)
		}
		do(t, ctx,
			chromedp.Click(chromedp.CSS(sel+" details.edit summary")),
			chromedp.SendKeys(chromedp.CSS(sel+` input[name="ticket"]`), "https://issues.example.com/OPS-7"),
			chromedp.SendKeys(chromedp.CSS(sel+` textarea[name="note"]`), "Warehouse API rate-limits us at 09:00; retry after."),
		)
		clickAndWait(t, ctx, sel+` form button[type="submit"]`)
		if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector("%s .ticket a").href`, sel)); got != "https://issues.example.com/OPS-7" {
			t.Fatalf("ticket link %q", got)
		}
		g, err := s.store.GroupByID(context.Background(), gid)
		if err != nil {
			t.Fatal(err)
		}
		if g.Ticket == nil || *g.Ticket != "https://issues.example.com/OPS-7" || g.Note == nil || !strings.HasPrefix(*g.Note, "Warehouse API") {
			t.Fatalf("stored group: %+v", g)
		}
		screenshot(t, ctx, "groups.png")
	})

	t.Run("ReadableWithoutJavaScript", func(t *testing.T) {
		ctx := tab(t)
		if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			t.Fatal(err)
		}
		login(t, ctx, base, svcViewerToken)
		do(t, ctx, chromedp.Navigate(base+"/failures/"+s.seeded["json"].id.String()))
		// Without scripts, every view of the value shows, one under the other.
		for _, id := range []string{"view-json", "view-hex", "view-text", "view-decoded"} {
			do(t, ctx, chromedp.WaitVisible(chromedp.ID(id)))
		}
		do(t, ctx, chromedp.WaitNotVisible(chromedp.CSS(".tabs")))
		if got := text(t, ctx, "#view-hex pre.hex"); !strings.Contains(got, "7b 22 6f 72") {
			t.Fatalf("hex view without scripts: %q", got)
		}
		do(t, ctx, chromedp.Navigate(base+"/failures?topic="+ordersTopic), chromedp.WaitVisible(chromedp.ID("failures")))
		clickAndWait(t, ctx, "#failures tbody tr:first-child a.detail-link")
		if got := text(t, ctx, "#state"); got == "" {
			t.Fatal("no detail page after following a row's link")
		}
	})

	t.Run("NarrowWindowAndKeyboard", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, svcOperatorToken)
		do(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("failures")))
		if eval[bool](t, ctx, `document.documentElement.scrollWidth > 390`) {
			t.Error("the list page is wider than 390 px (only its table may scroll sideways)")
		}
		screenshot(t, ctx, "failures-narrow.png")
		do(t, ctx, chromedp.Navigate(base+"/failures/"+s.seeded["json"].id.String()), chromedp.WaitVisible(chromedp.ID("view-json")))
		if eval[bool](t, ctx, `document.documentElement.scrollWidth > 390`) {
			t.Error("the detail page is wider than 390 px")
		}
		screenshot(t, ctx, "failure-narrow.png")

		// Keyboard: the first Tab reaches the skip link; the tabs follow the arrow keys.
		do(t, ctx, chromedp.EmulateViewport(1280, 900), chromedp.KeyEvent("\t"))
		waitUntil(t, ctx, "the first Tab to focus the skip link", `document.activeElement.className === "skip"`)
		do(t, ctx, chromedp.Focus(chromedp.ID("tab-json")), chromedp.KeyEvent(kb.ArrowRight))
		waitUntil(t, ctx, "ArrowRight to select the hex tab", `document.activeElement.id === "tab-hex" && !document.getElementById("view-hex").hidden`)
	})
}

func countState(t *testing.T, s *service, st redrive.State) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM failures WHERE state = $1`, string(st)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
