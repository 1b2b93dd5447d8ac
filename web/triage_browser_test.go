package web

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/testkit"
)

// rowsJS lists the failure ids of the rows of the table with the id in a page.
const rowsJS = `Array.from(document.querySelectorAll("#%s tbody tr[data-id]")).map(r => r.dataset.id).join(",")`

// The triage features in a browser: the list's total, paging forth and back, the advanced
// search, the group list's filters and the group page.
func TestBrowserTriage(t *testing.T) {
	startBrowser(t)
	f := newFixture(t) // 2 rows a page
	const trace = "0af7651916cd43dd8448eb211c80319c"
	traced := testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "traces", PublisherService: "tracing",
		ErrorMessage: "traced failure", HeaderNames: []string{"traceparent"},
		HeaderValues: [][]byte{[]byte("00-" + trace + "-b7ad6b7169203331-01")}})
	base := f.srv.URL

	t.Run("TotalAndPaging", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, operatorToken)
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("total")))
		if got := text(t, ctx, "#total"); got != "5 failures" {
			t.Fatalf("total %q, want 5 failures", got)
		}
		rows := func() string { return eval[string](t, ctx, strings.Replace(rowsJS, "%s", "failures", 1)) }
		first := rows()
		if strings.Count(first, ",") != 1 {
			t.Fatalf("first page rows %q, want 2", first)
		}
		screenshot(t, ctx, "failures-total.png")
		clickAndWait(t, ctx, "#next-page")
		second := rows()
		if second == first || strings.Count(second, ",") != 1 {
			t.Fatalf("second page rows %q after %q", second, first)
		}
		clickAndWait(t, ctx, "#next-page")
		third := rows()
		if third == "" || third == second || strings.Contains(third, ",") {
			t.Fatalf("third page rows %q", third)
		}
		if eval[bool](t, ctx, `document.getElementById("next-page") !== null`) {
			t.Error("the last page links to a next page")
		}
		clickAndWait(t, ctx, "#prev-page")
		if got := rows(); got != second {
			t.Fatalf("previous of the third page shows %q, want %q", got, second)
		}
		clickAndWait(t, ctx, "#prev-page")
		if got := rows(); got != first {
			t.Fatalf("previous of the second page shows %q, want %q", got, first)
		}
		if loc := run(t, ctx, chromedp.Location()); strings.Contains(loc, "cursor=") {
			t.Errorf("back on the first page at %s", loc)
		}
	})

	t.Run("AdvancedSearchByTraceID", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, viewerToken)
		do(t, ctx, chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.ID("failures")))
		if eval[bool](t, ctx, `document.getElementById("advanced-search").open`) {
			t.Fatal("the advanced search is open without an advanced criterion")
		}
		do(t, ctx, chromedp.Click(chromedp.CSS("#advanced-search > summary")), chromedp.WaitVisible(chromedp.ID("f-trace-id")),
			chromedp.SendKeys(chromedp.ID("f-trace-id"), trace))
		clickAndWait(t, ctx, "#apply-filter")
		if loc := run(t, ctx, chromedp.Location()); !strings.Contains(loc, "trace_id="+trace) {
			t.Fatalf("the search is not in the address: %s", loc)
		}
		if got := eval[string](t, ctx, strings.Replace(rowsJS, "%s", "failures", 1)); got != traced.String() {
			t.Fatalf("trace id search shows %q, want %s", got, traced)
		}
		if got := text(t, ctx, "#total"); got != "1 failure" {
			t.Errorf("total %q", got)
		}
		if !eval[bool](t, ctx, `document.getElementById("advanced-search").open`) {
			t.Error("the advanced search is closed although it holds the search")
		}
		if got := text(t, ctx, "#failures tbody tr .row-message"); got != "traced failure" {
			t.Errorf("row message %q", got)
		}
		screenshot(t, ctx, "failures-search.png")
		// Too broad: the core's reason shows next to the form.
		do(t, ctx, chromedp.Navigate(base+"/failures?payload=order"), chromedp.WaitVisible(chromedp.ID("filter-error")))
		if got := text(t, ctx, "#filter-error"); !strings.HasPrefix(got, "payload: ") {
			t.Errorf("error %q", got)
		}
	})

	t.Run("GroupFiltersAndGroupPage", func(t *testing.T) {
		ctx := tab(t)
		login(t, ctx, base, operatorToken)
		billing := strconv.FormatInt(f.groups[0], 10)
		do(t, ctx, chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(chromedp.ID("group-filter")))
		// Three groups, two a page.
		if n := eval[float64](t, ctx, `document.querySelectorAll("#groups section.group").length`); n != 2 {
			t.Fatalf("%v groups on the first page, want 2", n)
		}
		clickAndWait(t, ctx, "#groups-next")
		if n := eval[float64](t, ctx, `document.querySelectorAll("#groups section.group").length`); n != 1 {
			t.Fatalf("%v groups on the second page, want 1", n)
		}
		clickAndWait(t, ctx, "#groups-prev")
		if n := eval[float64](t, ctx, `document.querySelectorAll("#groups section.group").length`); n != 2 {
			t.Fatalf("%v groups back on the first page, want 2", n)
		}
		do(t, ctx, chromedp.SendKeys(chromedp.ID("g-service"), "billing"))
		clickAndWait(t, ctx, "#apply-group-filter")
		if got := eval[string](t, ctx, `Array.from(document.querySelectorAll("#groups section.group")).map(s => s.id).join(",")`); got != "group-"+billing {
			t.Fatalf("filtered groups %q", got)
		}
		if got := text(t, ctx, "#group-"+billing+" .sample"); got != "cannot decode <b>orders</b>" {
			t.Errorf("sample message %q", got)
		}
		clickAndWait(t, ctx, "#group-"+billing+" a.group-link")
		if got := text(t, ctx, "#group-total"); got != "(2 failures)" {
			t.Fatalf("group total %q", got)
		}
		if n := eval[float64](t, ctx, `document.querySelectorAll("#group-failures tbody tr[data-id]").length`); n != 2 {
			t.Fatalf("group page rows %v", n)
		}
		// The ticket form on the group page returns to it, with the change in its audit.
		do(t, ctx, chromedp.Click(chromedp.CSS("details.edit > summary")), chromedp.WaitVisible(chromedp.CSS(`details.edit input[name="ticket"]`)),
			chromedp.SendKeys(chromedp.CSS(`details.edit input[name="ticket"]`), "OPS-42"))
		clickAndWait(t, ctx, `details.edit button[type="submit"]`)
		do(t, ctx, chromedp.WaitVisible(chromedp.ID("group-audit")))
		if got := text(t, ctx, "#group-audit tbody tr:last-child"); !strings.Contains(got, "group_update") || !strings.Contains(got, "OPS-42") {
			t.Errorf("group audit row %q", got)
		}
		if loc := run(t, ctx, chromedp.Location()); !strings.Contains(loc, "/groups/"+billing+"?") {
			t.Errorf("after saving at %s", loc)
		}
		screenshot(t, ctx, "group.png")
		// "Without a ticket" now leaves billing out.
		do(t, ctx, chromedp.Navigate(base+"/groups"), chromedp.WaitVisible(chromedp.ID("g-no-ticket")), chromedp.Click(chromedp.ID("g-no-ticket")))
		clickAndWait(t, ctx, "#apply-group-filter")
		if eval[bool](t, ctx, `document.getElementById("group-`+billing+`") !== null`) {
			t.Error("a group with a ticket is listed as without one")
		}
		if n := eval[float64](t, ctx, `document.querySelectorAll("#groups section.group").length`); n != 2 {
			t.Errorf("%v groups without a ticket, want 2", n)
		}
		screenshot(t, ctx, "groups-filtered.png")
	})
}

// lastActionRow returns the text of the last audit row of a failure's page that is not a
// payload view (a reader with the payload permission adds one on every visit).
func lastActionRow(t *testing.T, ctx context.Context) string {
	t.Helper()
	return eval[string](t, ctx, `(Array.from(document.querySelectorAll("#audit tbody tr")).filter(r => r.cells[1].textContent !== "payload_view").pop() || {innerText: ""}).innerText`)
}
