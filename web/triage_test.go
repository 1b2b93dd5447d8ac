package web

import (
	"context"
	"encoding/base64"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
)

// act posts an action and, when the server redirects to the result page (post/redirect/get),
// follows the redirect; any other answer is returned as it is.
func (c *client) act(path string, form url.Values) (*http.Response, string) {
	c.f.t.Helper()
	resp, body := c.do("POST", path, form)
	if resp.StatusCode != http.StatusSeeOther {
		return resp, body
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "/failures/result?") {
		c.f.t.Fatalf("%s redirects to %q, not to the result page", path, loc)
	}
	return c.do("GET", loc, nil)
}

// auditCount counts the audit entries of the fixture's database.
func (f *fixture) auditCount() int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action <> 'payload_view'`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// exec runs SQL on the fixture's database.
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// mustContain fails the test unless body holds every one of want.
func mustContain(t *testing.T, what, body string, want ...string) {
	t.Helper()
	missing := false
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %s", what, w)
			missing = true
		}
	}
	if missing {
		t.Fatalf("%s:\n%s", what, body)
	}
}

// pagerLink returns the address of the pager link with id on a page ("" when absent).
func pagerLink(body, id string) string {
	re := regexp.MustCompile(`<a href="([^"]*)"(?: rel="[a-z]+")? id="` + regexp.QuoteMeta(id) + `"`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// rowIDs returns the failure ids of a list page's rows, in order.
func rowIDs(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr data-id="([0-9a-f-]{36})">`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestListTotalPagingRowsAndBadges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// ids[3] is RESENT: it shows when it was resent, never a next attempt.
	f.exec(`UPDATE failures SET resent_at = now(), next_attempt_at = '2001-02-03 04:05:06Z' WHERE id = $1`, f.ids[3])
	// ids[2] came from a Spring dead-letter topic, as a tombstone at an unknown position.
	f.exec(`UPDATE failures SET original_value = NULL, source_format = 'spring', source_topic = 'orders.DLT',
		source_partition = 0, source_offset = 7, original_partition = -1, original_offset = -1 WHERE id = $1`, f.ids[2])
	c := f.client()
	c.login(viewerToken)

	resp, body := c.do("GET", "/failures", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("list: %d", resp.StatusCode)
	}
	mustContain(t, "first page", body,
		`<p class="total" id="total" role="status">4 failures</p>`,
		// The error message is in the row, not only in a tooltip, and escaped.
		`cannot decode &lt;b&gt;shipments&lt;/b&gt;</span>`,
		`<span class="note">resent</span>`,
		`<span class="badge tombstone"`, `>spring</span>`, `shipments / unknown / unknown`)
	if strings.Contains(body, "2001-02-03") {
		t.Error("a RESENT row shows a stale next attempt")
	}
	if got := rowIDs(body); len(got) != 2 || got[0] != f.ids[3].String() || got[1] != f.ids[2].String() {
		t.Fatalf("first page rows = %v", got)
	}
	if pagerLink(body, "prev-page") != "" || pagerLink(body, "first-page") != "" {
		t.Error("the first page links to a previous or first page")
	}
	// Next, then previous: back to the same first page.
	next := pagerLink(body, "next-page")
	if next == "" {
		t.Fatal("no next page link")
	}
	_, body = c.do("GET", next, nil)
	if got := rowIDs(body); len(got) != 2 || got[0] != f.ids[1].String() || got[1] != f.ids[0].String() {
		t.Fatalf("second page rows = %v", got)
	}
	mustContain(t, "second page", body, `id="total" role="status">4 failures<`)
	prev := pagerLink(body, "prev-page")
	if prev == "" || prev != pagerLink(body, "first-page") || pagerLink(body, "next-page") != "" {
		t.Fatalf("second page links: prev %q first %q next %q", prev, pagerLink(body, "first-page"), pagerLink(body, "next-page"))
	}
	_, body = c.do("GET", prev, nil)
	if got := rowIDs(body); len(got) != 2 || got[0] != f.ids[3].String() {
		t.Fatalf("back on the first page: %v", got)
	}
	// A filter is kept by the pager and counted.
	_, body = c.do("GET", "/failures?topic=orders", nil)
	mustContain(t, "filtered", body, `id="total" role="status">2 failures<`)
	_, body = c.do("GET", "/failures?topic=nothing", nil)
	mustContain(t, "empty", body, `id="total" role="status">0 failures<`, "No failures match.")

	// The detail says tombstone, names the source and the unknown positions.
	_, body = c.do("GET", "/failures/"+f.ids[2].String(), nil)
	mustContain(t, "tombstone detail", body, "null value — a tombstone; a resend produces a null value",
		`shipments / unknown / unknown`, `<span class="badge source">spring</span> read from <span class="mono">orders.DLT / 0 / 7</span>`)
	c2 := f.client()
	c2.login(noPayloadToken)
	_, body = c2.do("GET", "/failures/"+f.ids[2].String(), nil)
	mustContain(t, "tombstone detail without payload", body, `<span id="tombstone">null value — a tombstone`)
}

func TestListAdvancedSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ids := map[string]uuid.UUID{}
	for name, row := range map[string]testkit.FailureRow{
		"binary":  {Topic: "keys", Key: []byte{0xff, 0xfe, 0x00, 'a'}},
		"unicode": {Topic: "keys", Key: []byte("schlüssel-ü-\u202e-1")},
		"traced": {Topic: "traces", HeaderNames: []string{"traceparent", "x-tenant"},
			HeaderValues: [][]byte{[]byte("00-" + trace + "-00f067aa0ba902b7-01"), []byte("acme")}, Value: []byte(`{"needle":"haystack"}`)},
	} {
		ids[name] = testkit.InsertFailure(t, f.pool, row)
	}
	c := f.client()
	c.login(viewerToken)
	find := func(query string, want ...uuid.UUID) string {
		t.Helper()
		resp, body := c.do("GET", "/failures?"+query, nil)
		got := rowIDs(body)
		var ws []string
		for _, w := range want {
			ws = append(ws, w.String())
		}
		slices.Sort(got)
		slices.Sort(ws)
		if resp.StatusCode != 200 || strings.Join(got, ",") != strings.Join(ws, ",") {
			t.Errorf("%s: %d rows %v, want %v", query, resp.StatusCode, got, ws)
		}
		return body
	}
	body := find(url.Values{"key_prefix_base64": {base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe})}}.Encode(), ids["binary"])
	// Bytes that are not text are offered back in base64, in the open advanced section.
	mustContain(t, "binary prefix", body, `<details class="advanced" id="advanced-search" open>`,
		`name="key_prefix_base64" id="f-key-prefix-base64" value="//4="`)
	body = find(url.Values{"key_prefix": {"schlüssel-ü"}}.Encode(), ids["unicode"])
	mustContain(t, "unicode prefix", body, `name="key_prefix" id="f-key-prefix" value="schlüssel-ü"`)
	find(url.Values{"key_prefix": {"schlüssel-x"}}.Encode())
	find("trace_id="+strings.ToUpper(trace), ids["traced"])
	find("header=x-tenant%3Dacme", ids["traced"])
	find("header=x-tenant%3Dother")
	find("source_format=mpfe&topic=keys", ids["unicode"], ids["binary"])
	find("source_format=spring")
	find("payload=needle&topic=traces", ids["traced"])
	find("no_ticket=true&topic=traces", ids["traced"])

	// Too broad: the core's reason next to the form, which keeps what was entered.
	resp, body := c.do("GET", "/failures?payload=needle", nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unbounded payload search: %d", resp.StatusCode)
	}
	mustContain(t, "unbounded payload search", body, `id="filter-error">payload: a payload search reads the payloads themselves`,
		`name="payload" id="f-payload" value="needle"`, `id="advanced-search" open`)
	if strings.Contains(body, `id="total"`) {
		t.Error("a refused search shows a total")
	}
}

func TestPostRedirectGet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/failures")
	id := f.ids[0].String()
	resp, _ := op.do("POST", "/failures/close", url.Values{"csrf": {tok}, "id": {id, f.ids[3].String()}, "reason": {"duplicate"},
		"back": {"/failures/" + id}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/failures/result?r=") {
		t.Fatalf("close: %d to %q", resp.StatusCode, loc)
	}
	audits := f.auditCount()
	if audits != 1 || f.state(f.ids[0]) != redrive.StateClosed {
		t.Fatalf("after the close: %d audit entries, state %s", audits, f.state(f.ids[0]))
	}
	var first string
	for i := range 2 { // a reload shows the same result and acts on nothing
		resp, body := op.do("GET", loc, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("result %d: %d", i, resp.StatusCode)
		}
		mustContain(t, "result", body, `<strong id="done-count">1</strong> closed`, `<strong id="count-conflict">1</strong>`,
			`By token:olivia at`, `<a href="/failures/`+f.ids[3].String()+`">`)
		// Back to where the action started, the list (and the nav's link to it): each once.
		if strings.Count(body, `href="/failures/`+id+`"`) != 1 || strings.Count(body, `href="/failures"`) != 2 || strings.Contains(body, `id="back-to-failure"`) {
			t.Errorf("result links are duplicated:\n%s", body)
		}
		if i == 0 {
			first = body
		} else if rowsOf(first) != rowsOf(body) {
			t.Error("the reload shows another result")
		}
		if n := f.auditCount(); n != audits {
			t.Fatalf("showing the result wrote audit entries: %d, want %d", n, audits)
		}
	}
	// A viewer may read a result; nobody can forge or change one.
	v := f.client()
	v.login(viewerToken)
	if resp, _ := v.do("GET", loc, nil); resp.StatusCode != 200 {
		t.Errorf("viewer reading the result: %d", resp.StatusCode)
	}
	payload, mac, _ := strings.Cut(strings.TrimPrefix(loc, "/failures/result?r="), ".")
	forged := strings.Replace(payload, "a", "b", 1) + "." + mac
	for _, bad := range []string{"/failures/result", "/failures/result?r=" + forged, "/failures/result?r=" + payload + ".AAAA", "/failures/result?r=x"} {
		resp, body := op.do("GET", bad, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "This result address is not valid") {
			t.Errorf("%s: %d", bad, resp.StatusCode)
		}
	}
	// One failure closed from its page: one link back to it, no second "Back" to the same.
	resp, _ = op.do("POST", "/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[1].String()}, "reason": {"dup"}, "back": {"/failures/" + f.ids[1].String()}})
	_, body := op.do("GET", resp.Header.Get("Location"), nil)
	mustContain(t, "result of a single close", body, `<a href="/failures/`+f.ids[1].String()+`" id="back-to-failure">`)
	if strings.Contains(body, `id="back"`) || strings.Count(body, `href="/failures/`+f.ids[1].String()+`"`) != 1 {
		t.Errorf("the single result links its failure twice:\n%s", body)
	}
	// An action started on a filtered list returns there, once.
	resp, _ = op.do("POST", "/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[2].String()}, "reason": {"dup"}, "back": {"/failures?topic=shipments"}})
	_, body = op.do("GET", resp.Header.Get("Location"), nil)
	mustContain(t, "result of a list action", body, `<a href="/failures?topic=shipments" id="back">Back</a>`, `id="all-failures"`)
	if strings.Count(body, `href="/failures?topic=shipments"`) != 1 {
		t.Error("a list action's result links the list twice")
	}
}

// rowsOf returns the result list of a result page.
func rowsOf(body string) string {
	i, j := strings.Index(body, `<ul class="result"`), strings.Index(body, `</ul>`)
	if i < 0 || j < i {
		return ""
	}
	return body[i:j]
}

func TestGroupPagesFilterAndShow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	billing, shipping := f.groups[0], f.groups[1]
	hash := strings.Repeat("ab12", 16)
	f.exec(`UPDATE failure_groups SET stack_trace_hash = $2, last_seen = now() - interval '3 hours' WHERE id = $1`, billing, hash)
	f.exec(`UPDATE failure_groups SET last_seen = now() - interval '1 hour' WHERE id = $1`, shipping)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/groups")

	// A ticket set on the group page returns to it, with the change in the group's audit.
	resp, _ := op.do("POST", "/groups/"+strconv.FormatInt(billing, 10), url.Values{"csrf": {tok}, "ticket": {"OPS-7"}, "note": {"vendor bug"},
		"back": {"/groups/" + strconv.FormatInt(billing, 10)}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/groups/"+strconv.FormatInt(billing, 10)+"?updated=") {
		t.Fatalf("group update: %d to %q", resp.StatusCode, loc)
	}
	_, body := op.do("GET", loc, nil)
	mustContain(t, "group page", body, `id="group-total">(2 failures)`, `<code class="hash">`+hash+`</code>`,
		`id="group-audit"`, "group_update", "ticket</span>: none → OPS-7", "note</span>: none → vendor bug", `<td>token:olivia</td>`,
		`cannot decode &lt;b&gt;orders&lt;/b&gt;`, `<a href="/failures?group_id=`+strconv.FormatInt(billing, 10)+`" id="group-in-list">`,
		`action="/groups/`+strconv.FormatInt(billing, 10)+`"`)
	if rows := rowIDs(body); len(rows) != 2 || rows[0] != f.ids[1].String() {
		t.Errorf("group page rows = %v", rows)
	}
	if resp, _ := op.do("GET", "/groups/999999", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown group: %d", resp.StatusCode)
	}
	if resp, _ := op.do("GET", "/groups/"+strconv.FormatInt(billing, 10)+"?cursor=bad", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad cursor: %d", resp.StatusCode)
	}

	groupsOf := func(query string) []string {
		t.Helper()
		resp, body := op.do("GET", "/groups?"+query, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("/groups?%s: %d %s", query, resp.StatusCode, body)
		}
		var out []string
		for _, m := range regexp.MustCompile(`<section class="group[^"]*" id="group-([0-9]+)"`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	b, s := strconv.FormatInt(billing, 10), strconv.FormatInt(shipping, 10)
	from := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")
	for query, want := range map[string]string{
		"":                                  s + "," + b,
		"no_ticket=true":                    s,
		"ticket=OPS-7":                      b,
		"publisher_service=shipping":        s,
		"error_code=DESERIALIZATION_FAILED": b,
		"open=true":                         s + "," + b,
		"last_seen_from=" + from:            s,
		"last_seen_to=" + from:              b,
	} {
		if got := strings.Join(groupsOf(query), ","); got != want {
			t.Errorf("groups?%s = %s, want %s", query, got, want)
		}
	}
	// Closing billing's open failures takes it out of "with open failures".
	f.exec(`UPDATE failures SET state = 'CLOSED', closed_at = now(), closed_by = 'x', closed_reason = 'x', next_attempt_at = NULL WHERE group_id = $1`, billing)
	if got := strings.Join(groupsOf("open=true"), ","); got != s {
		t.Errorf("open groups after the close = %s", got)
	}
	_, body = op.do("GET", "/groups?publisher_service=billing", nil)
	mustContain(t, "group list", body, `<p class="sample"`, `cannot decode &lt;b&gt;orders&lt;/b&gt;</p>`,
		`<code class="hash">`+hash+`</code>`, `id="g-service" value="billing"`, `href="/groups/`+b+`"`)
	resp, body = op.do("GET", "/groups?ticket=X&no_ticket=true", nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="group-filter-error">no_ticket: give ticket or no_ticket, not both`) ||
		!strings.Contains(body, `id="g-ticket" value="X"`) {
		t.Errorf("contradicting filter: %d %s", resp.StatusCode, body)
	}
}

// With a tracker configured, an operator opens a ticket from the group page; the ticket links
// through the template; a tracker failure is shown and changes nothing.
func TestOpenTicketFromGroupPage(t *testing.T) {
	t.Parallel()
	fail := false
	f := newFixtureWith(t, fixtureOptions{core: func(c *operator.Config) {
		c.OpenTicket = func(_ context.Context, g *redrive.Group) (string, error) {
			if fail {
				return "", errors.New("Jira answered 503 Service Unavailable")
			}
			return "OPS-" + strconv.FormatInt(g.ID, 10), nil
		}
		c.TicketURL = func(t string) string { return "https://tracker.example/browse/" + t }
	}})
	c := f.client()
	c.login(operatorToken)
	page := "/groups/" + strconv.FormatInt(f.groups[0], 10)
	_, body := c.do("GET", page, nil)
	if !strings.Contains(body, `id="open-ticket"`) {
		t.Fatal("no button to open a ticket")
	}
	resp, _ := c.do("POST", page+"/ticket", url.Values{"csrf": {c.csrf(page)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("open ticket = %d", resp.StatusCode)
	}
	_, body = c.do("GET", page, nil)
	want := "OPS-" + strconv.FormatInt(f.groups[0], 10)
	if !strings.Contains(body, `href="https://tracker.example/browse/`+want+`"`) || strings.Contains(body, `id="open-ticket"`) {
		t.Errorf("after opening: no ticket link, or the button is still there")
	}
	fail = true
	other := "/groups/" + strconv.FormatInt(f.groups[1], 10)
	resp, body = c.do("POST", other+"/ticket", url.Values{"csrf": {c.csrf(other)}})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "503") {
		t.Errorf("tracker down = %d", resp.StatusCode)
	}
	viewer := f.client()
	viewer.login(viewerToken)
	if resp, _ := viewer.do("POST", other+"/ticket", url.Values{"csrf": {viewer.csrf(other)}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer = %d", resp.StatusCode)
	}
}

// The list exports what it shows as NDJSON; without the payload permission the lines hold no
// payload.
func TestExportFromTheList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login(viewerToken)
	_, body := c.do("GET", "/failures?topic=orders", nil)
	if !strings.Contains(body, `id="export" download`) || !strings.Contains(body, `href="/failures/export?topic=orders"`) {
		t.Fatalf("no export link for the filter")
	}
	resp, body := c.do("GET", "/failures/export?topic=orders", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || strings.Count(body, "\n") != 2 ||
		!strings.Contains(body, `"format":"redrive.failure.v1"`) || !strings.Contains(body, `"value":"`) {
		t.Errorf("export = %d %q", resp.StatusCode, body)
	}
	nopay := f.client()
	nopay.login(noPayloadToken)
	if _, body := nopay.do("GET", "/failures/export?topic=orders", nil); strings.Contains(body, `"value":"`) || !strings.Contains(body, `"payload_hidden":true`) {
		t.Errorf("export without the payload permission holds payloads")
	}
	if resp, _ := c.do("GET", "/failures/export?state=NOPE", nil); resp.StatusCode != 400 {
		t.Errorf("bad filter = %d", resp.StatusCode)
	}
}
