package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
)

// The secret of the masked Protobuf field of the browser's decoded field search.
const browserFieldSecret = "pb-browser-secret-7713@example.com"

// The decoded field search in a browser, from the list form as rendered and submitted by its
// button: Protobuf values written by the registry's own serializer, bounded by a topic; the
// fields disabled for a principal without the payload permission, whose crafted address is
// refused naming payload_field; a masked field's secret matches nothing and shows nowhere.
func TestBrowserFieldSearch(t *testing.T) {
	startBrowser(t)
	reg := payloadtest.Registry(t)
	decoder, err := payload.New(payload.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := masking.Parse(strings.NewReader("pb-masked json /customer/email\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, fixtureOptions{core: func(c *operator.Config) { c.Masking, c.Payloads = rules, decoder }})
	order := func(id, email string) string {
		return `{"id":"` + id + `","customer":{"name":"Ada","email":"` + email + `"},"quantity":3}`
	}
	insert := func(topic, id, email string) string {
		return testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: topic, PublisherService: "shop",
			Value: payloadtest.Protobuf(t, reg, topic, "shop.Order", order(id, email))}).String()
	}
	match := insert("pb-orders", "o-1", "ada@example.com")
	other := insert("pb-orders", "o-2", "eve@example.com")
	masked := insert("pb-masked", "o-3", browserFieldSecret)
	base := f.srv.URL
	rows := func(t *testing.T, ctx context.Context) string {
		t.Helper()
		return eval[string](t, ctx, strings.Replace(rowsJS, "%s", "failures", 1))
	}

	// searchByForm loads the list as rendered, fills the topic and the decoded field search
	// in the advanced section, and submits the form with its button.
	searchByForm := func(t *testing.T, ctx context.Context, topic, field, input, term string) {
		t.Helper()
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("filter-form")),
			chromedp.SendKeys(chromedp.ID("f-topic"), topic),
			chromedp.Click(chromedp.CSS("#advanced-search > summary")), chromedp.WaitVisible(chromedp.ID("f-payload-field")),
			chromedp.SendKeys(chromedp.ID("f-payload-field"), field),
			chromedp.SendKeys(chromedp.ID(input), term))
		clickAndWait(t, ctx, "#apply-filter")
		do(t, ctx, chromedp.WaitVisible(chromedp.ID("total")))
	}

	t.Run("MatchingRowListed", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, operatorToken)
		searchByForm(t, ctx, "pb-orders", "/customer/email", "f-payload-field-value", "ada@example.com")
		loc := run(t, ctx, chromedp.Location())
		if !strings.Contains(loc, "payload_field=%2Fcustomer%2Femail") || !strings.Contains(loc, "payload_field_value=ada%40example.com") {
			t.Fatalf("the search is not in the address: %s", loc)
		}
		if strings.Contains(loc, "publisher_service=") {
			t.Errorf("the address holds the form's empty fields: %s", loc)
		}
		if got := rows(t, ctx); got != match {
			t.Fatalf("decoded field search lists %q, want only %s (not %s)", got, match, other)
		}
		if got := text(t, ctx, "#total"); got != "1 matching on this page, 2 candidates decoded" {
			t.Errorf("scan label %q", got)
		}
		// The form shows the search back, in its open advanced section.
		if got := eval[string](t, ctx, `[document.getElementById("advanced-search").open, document.getElementById("f-payload-field").value,
			document.getElementById("f-payload-field-value").value, document.getElementById("f-topic").value].join("|")`); got != "true|/customer/email|ada@example.com|pb-orders" {
			t.Errorf("the form after the search: %q", got)
		}
		// Back to the blank form: the fields left empty (and out of the address) by the
		// submission are enabled again.
		// (history.back, not NavigateBack: a page restored from the back-forward cache
		// fires no load event to wait for.)
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`history.back()`))
		waitAcrossNavigation(t, ctx, "the empty fields enabled again after going back",
			`location.search === "" && !document.getElementById("f-service").disabled && !document.getElementById("f-payload-field-contains").disabled`)
		// The same search by "contains": the other row's text is no match for this one.
		searchByForm(t, ctx, "pb-orders", "/customer/email", "f-payload-field-contains", "eve@")
		if got := rows(t, ctx); got != other {
			t.Fatalf("contains search lists %q, want only %s", got, other)
		}
	})

	t.Run("WithoutPayloadPermission", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, noPayloadToken)
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("filter-form")))
		// Once the page has finished loading (its load and pageshow handlers have run), the
		// fields are still disabled.
		waitUntil(t, ctx, "the page loaded", `performance.getEntriesByType("navigation")[0].loadEventEnd > 0`)
		do(t, ctx, chromedp.Click(chromedp.CSS("#advanced-search > summary")), chromedp.WaitVisible(chromedp.ID("f-payload-field")))
		if got := eval[string](t, ctx, `["f-payload-field", "f-payload-field-value", "f-payload-field-contains", "f-key", "f-key-prefix", "f-payload"].map(id => id + "=" + document.getElementById(id).disabled).join(",")`); got != "f-payload-field=true,f-payload-field-value=true,f-payload-field-contains=true,f-key=true,f-key-prefix=true,f-payload=true" {
			t.Errorf("decoded field inputs for a principal without the payload permission: %s", got)
		}
		// A crafted address: refused naming payload_field, not a server error; nothing listed.
		crafted := base + "/failures?topic=pb-orders&payload_field=%2Fcustomer%2Femail&payload_field_value=ada%40example.com"
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(crafted))
		if err != nil {
			t.Fatalf("browser: %v", err)
		}
		if resp.Status != http.StatusForbidden {
			t.Errorf("crafted decoded field search = %d, want 403", resp.Status)
		}
		do(t, ctx, chromedp.WaitVisible(chromedp.ID("filter-error")))
		if got := text(t, ctx, "#filter-error"); !strings.HasPrefix(got, "payload_field: ") || !strings.Contains(got, "payload permission") {
			t.Errorf("refusal %q, want one naming payload_field", got)
		}
		if got := rows(t, ctx); got != "" {
			t.Errorf("the refused search lists %q", got)
		}
	})

	t.Run("MaskedFieldSecret", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, operatorToken)
		// The exact secret: the masked view reads asterisks, so nothing matches.
		searchByForm(t, ctx, "pb-masked", "/customer/email", "f-payload-field-value", browserFieldSecret)
		if got := rows(t, ctx); got != "" {
			t.Fatalf("a search by the masked secret lists %q (the masked failure is %s)", got, masked)
		}
		if got := text(t, ctx, "#total"); got != "0 matching on this page, 1 candidate decoded" {
			t.Errorf("scan label %q", got)
		}
		// The secret shows only as the searcher's own term, in the form's inputs that carry
		// the search: without those, it is nowhere in the page.
		html := eval[string](t, ctx, `(() => {
			const d = document.documentElement.cloneNode(true);
			d.querySelectorAll('input[name="payload_field_value"]').forEach(i => { if (i.value === `+strconv.Quote(browserFieldSecret)+`) { i.remove(); } });
			return d.outerHTML;
		})()`)
		if l := uiLeaks(html, []string{browserFieldSecret}); len(l) > 0 {
			t.Errorf("the page of a search by the masked secret shows it beyond the searched term")
		}
		// A part of the secret: nothing matches either, and the whole secret is nowhere in
		// the page's HTML.
		searchByForm(t, ctx, "pb-masked", "/customer/email", "f-payload-field-contains", "browser-secret")
		if got := rows(t, ctx); got != "" {
			t.Fatalf("a search by a part of the masked secret lists %q", got)
		}
		if got := text(t, ctx, "#total"); got != "0 matching on this page, 1 candidate decoded" {
			t.Errorf("scan label %q", got)
		}
		if l := uiLeaks(eval[string](t, ctx, `document.documentElement.outerHTML`), []string{browserFieldSecret}); len(l) > 0 {
			t.Errorf("the page of a search by a part of the masked secret shows the secret")
		}
	})
}

// waitAcrossNavigation is waitUntil for a condition that holds on the page a navigation under
// way loads: a poll that the navigation interrupts (its page's script context gone) starts
// again on the new page, until stepTimeout.
func waitAcrossNavigation(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		sctx, cancel := context.WithDeadline(ctx, deadline)
		_, err := chromedp.Run(sctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err == nil {
			return
		}
		gone := strings.Contains(err.Error(), "Cannot find context") || strings.Contains(err.Error(), "context was destroyed")
		if !gone || time.Now().After(deadline) {
			t.Fatalf("browser: waiting for %s (%s): %v", what, cond, err)
		}
	}
}
