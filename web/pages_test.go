package web

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
)

func TestFiltersNarrowTheList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login(viewerToken)
	for _, tc := range []struct {
		query string
		want  []int // indexes into f.ids
	}{
		{"state=PERMANENT", []int{1, 0}},
		{"state=permanent", []int{1, 0}}, // any case, as in the API
		{"topic=shipments", []int{3, 2}}, // newest first
		{"topic=shipments&state=RETRY_PENDING", []int{2}},
		{"temporality=TEMPORARY&error_code=TIMEOUT&state=RESENT", []int{3}},
		{"q=%3Cb%3Eorders", []int{1, 0}},
		{"key=key-orders", []int{1, 0}},
		{"key_base64=a2V5LW9yZGVycw%3D%3D", []int{1, 0}},
		{"group_id=" + strconv.FormatInt(f.groups[1], 10) + "&state=RETRY_PENDING", []int{2}},
	} {
		resp, body := c.do("GET", "/failures?"+tc.query, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", tc.query, resp.StatusCode)
		}
		got := regexp.MustCompile(`data-id="([^"]+)"`).FindAllStringSubmatch(body, -1)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d rows, want %d", tc.query, len(got), len(tc.want))
		}
		for i, w := range tc.want {
			if got[i][1] != f.ids[w].String() {
				t.Errorf("%s: row %d is %s, want failure %d", tc.query, i, got[i][1], w)
			}
		}
	}
	// Paging (2 rows a page) keeps the filter.
	_, body := c.do("GET", "/failures?temporality=PERMANENT&temporality=TEMPORARY", nil)
	next := regexp.MustCompile(`href="(/failures\?[^"]*cursor=[^"]*)"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no next page link")
	}
	link := strings.ReplaceAll(next[1], "&amp;", "&")
	if !strings.Contains(link, "temporality=PERMANENT&temporality=TEMPORARY") {
		t.Fatalf("next link %q lost the filter", link)
	}
	_, body = c.do("GET", link, nil)
	if !strings.Contains(body, `data-id="`+f.ids[1].String()) || strings.Contains(body, `data-id="`+f.ids[3].String()) {
		t.Fatal("the second page does not hold the older failures")
	}

	for query, want := range map[string]string{
		"state=BOGUS":            "is not a state",
		"created_from=yesterday": "created_from: ",
		"cursor=not-a-cursor":    "cursor: ",
		"key=a&key_base64=YQ==":  "not both",
	} {
		resp, body := c.do("GET", "/failures?"+query, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="filter-error"`) || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want 400 with %q", query, resp.StatusCode, want)
		}
	}
}

func TestDetailShowsBytesHonestly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login(viewerToken)

	_, body := c.do("GET", "/failures/"+f.ids[1].String(), nil)
	if strings.Contains(body, "<script>alert") {
		t.Fatal("the <script> payload is not escaped")
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("the <script> payload is not shown as text")
	}
	if strings.Contains(body, "cannot decode <b>") || !strings.Contains(body, "cannot decode &lt;b&gt;") {
		t.Fatal("the error message is not escaped")
	}

	_, body = c.do("GET", "/failures/"+f.ids[2].String(), nil)
	for _, want := range []string{
		`00 ff 68 69 1b`, // hex
		`|..hi.|`,        // printable column
		`<span class="esc">\x00\xff</span>hi<span class="esc">\x1b</span>`,
		`data-default="hex"`,
		`<span class="note">null</span>`,
		"RETRY_PENDING",
		"Confluent wire format with schema id", // the core's Avro decoder says why it did not decode
	} {
		if !strings.Contains(body, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	if strings.Contains(body, `id="retry"`) {
		t.Error("a viewer sees the retry button")
	}

	_, body = c.do("GET", "/failures/"+f.ids[0].String(), nil)
	if !strings.Contains(body, "&#34;order&#34;: 1") || !strings.Contains(body, `data-default="json"`) {
		t.Error("the JSON value is not pretty-printed")
	}

	resp, raw := c.do("GET", "/failures/"+f.ids[2].String()+"/value", nil)
	if resp.StatusCode != 200 || raw != "\x00\xffhi\x1b" || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download: %d %q %v", resp.StatusCode, raw, resp.Header)
	}
	if resp, raw := c.do("GET", "/failures/"+f.ids[2].String()+"/key", nil); resp.StatusCode != 200 || raw != "key-shipments" {
		t.Fatalf("key download: %d %q", resp.StatusCode, raw)
	}
	for _, path := range []string{"/failures/" + uuid.NewString(), "/failures/nope", "/failures/" + uuid.NewString() + "/value",
		"/failures/" + f.ids[2].String() + "/other"} {
		if resp, _ := c.do("GET", path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
}

func TestGroups(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login(operatorToken)
	_, body := c.do("GET", "/groups", nil)
	if !strings.Contains(body, "DESERIALIZATION_FAILED") || !strings.Contains(body, `<strong class="open-count">2</strong> open of 2`) {
		t.Fatalf("groups page: %s", body)
	}
	tok := csrfRE.FindStringSubmatch(body)[1]
	g := strconv.FormatInt(f.groups[1], 10)
	resp, _ := c.do("POST", "/groups/"+g, map[string][]string{"csrf": {tok}, "ticket": {"https://issues.example/JIRA-1"}, "note": {"<i>upstream</i>"}, "back": {"/groups"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/groups?updated="+g+"#group-"+g {
		t.Fatalf("update: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = c.do("GET", "/groups?updated="+g, nil)
	if !strings.Contains(body, `href="https://issues.example/JIRA-1"`) || !strings.Contains(body, "&lt;i&gt;upstream&lt;/i&gt;") {
		t.Fatal("the group does not show its ticket link and escaped note")
	}
	grp, err := f.store.GroupByID(t.Context(), f.groups[1])
	if err != nil || grp.Ticket == nil || *grp.Ticket != "https://issues.example/JIRA-1" {
		t.Fatalf("stored group: %+v, %v", grp, err)
	}
	// Saved as shown: nothing changes, nothing is audited.
	audited := func() (n int) {
		if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_log WHERE group_id = $1`, f.groups[1]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := audited()
	resp, _ = c.do("POST", "/groups/"+g, map[string][]string{"csrf": {tok}, "ticket": {"https://issues.example/JIRA-1"},
		"ticket_shown": {"https://issues.example/JIRA-1"}, "note": {"<i>upstream</i>"}, "note_shown": {"<i>upstream</i>"}})
	if resp.StatusCode != http.StatusSeeOther || audited() != before || before == 0 {
		t.Fatalf("unchanged edit: %d, %d audit entries before, %d after", resp.StatusCode, before, audited())
	}
	if resp, _ := c.do("POST", "/groups/999999", map[string][]string{"csrf": {tok}, "ticket": {"x"}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown group: %d", resp.StatusCode)
	}
	// The core's rules: the ticket is bounded, and an edit needs a field.
	resp, body = c.do("POST", "/groups/"+g, map[string][]string{"csrf": {tok}, "ticket": {strings.Repeat("x", redrive.MaxTicketLen+1)}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "ticket: ") {
		t.Fatalf("long ticket: %d", resp.StatusCode)
	}
	if resp, _ := c.do("POST", "/groups/"+g, map[string][]string{"csrf": {tok}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("empty edit: %d", resp.StatusCode)
	}
}

func TestOverview(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login(viewerToken)
	resp, body := c.do("GET", "/", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("overview: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`<span class="big" id="open-count">3</span>`,
		`<span class="big" id="count-RESENT">1</span>`,
		`href="/failures?state=RETRY_PENDING&amp;state=PERMANENT&amp;topic=orders">orders</a></td><td class="num">2</td>`,
		`href="/failures?publisher_service=shipping&amp;state=RETRY_PENDING&amp;state=PERMANENT">shipping</a></td><td class="num">1</td>`,
		`<rect class="bar"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %s", want)
		}
	}
}

func TestChart(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var buckets []redrive.TimeBucket
	for i := range 4 {
		buckets = append(buckets, redrive.TimeBucket{Start: since.Add(time.Duration(i) * time.Hour)})
	}
	buckets[2].Count = 9
	c := newChart(buckets, time.Hour)
	if len(c.Bars) != 4 || c.Total != 9 || c.Bars[2].Count != 9 || c.Bars[0].H != 0 {
		t.Fatalf("chart = %+v", c)
	}
	if top := c.YTicks[len(c.YTicks)-1].Label; top != "12" {
		t.Errorf("scale top %s, want 12", top)
	}
	if c.Bars[2].Y+c.Bars[2].H != chartBottom || c.Bars[2].H < 1 {
		t.Errorf("bar %+v does not stand on the axis", c.Bars[2])
	}
	for v, want := range map[int64]int64{0: 4, 4: 4, 5: 8, 9: 12, 13: 20, 61: 80, 81: 120, 999: 1200} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", v, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 12 * time.Minute: "12m", time.Hour: "1h", 200 * time.Minute: "3h 20m",
		24 * time.Hour: "1d", 98 * time.Hour: "4d 2h", -90 * time.Second: "in 1m",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	if err == nil || !strings.Contains(err.Error(), "invalid config: Core is required") || !strings.Contains(err.Error(), "Auth is required") {
		t.Fatalf("empty config: %v", err)
	}
	f := newFixture(t)
	a, err := auth.NewAuthenticator(auth.Config{InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Core: f.core, Auth: a, SessionKey: []byte("short"), PageSize: 501, ChartBuckets: 501, MaxPayloadView: 3})
	for _, want := range []string{"SessionKey", "PageSize", "ChartBuckets", "MaxPayloadView"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad config: %v, want it to name %s", err, want)
		}
	}
	if _, err := New(Config{Core: f.core, Auth: a}); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
}

// Without the payload permission the detail shows sizes and types and says why; the download
// is refused.
func TestDetailWithoutPayloadPermission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login(noPayloadToken)
	_, body := c.do("GET", "/failures/"+f.ids[1].String(), nil)
	if !strings.Contains(body, `id="payload-hidden"`) || !strings.Contains(body, "needs the payload permission") ||
		strings.Contains(body, "alert(1)") || strings.Contains(body, `id="view-hex"`) {
		t.Errorf("detail without the payload permission shows the payload or no reason")
	}
	if resp, _ := c.do("GET", "/failures/"+f.ids[1].String()+"/value", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("download without the payload permission = %d", resp.StatusCode)
	}
}
