package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789ab"
)

// fixture is a UI on a fake backend, served by httptest.
type fixture struct {
	t       *testing.T
	backend *fakeBackend
	srv     *httptest.Server
	ids     []uuid.UUID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b := &fakeBackend{now: now, groups: []*Group{
		{ID: 1, PublisherService: "billing", ErrorCode: "DESERIALIZATION_FAILED", FirstSeen: now.Add(-time.Hour), LastSeen: now},
		{ID: 2, PublisherService: "shipping", ErrorCode: "TIMEOUT", MessageType: "OrderShipped", FirstSeen: now.Add(-2 * time.Hour), LastSeen: now},
	}}
	f := &fixture{t: t, backend: b}
	for i, spec := range []struct {
		topic, service, code string
		temporality          avro.Temporality
		state                store.State
		value                []byte
		group                int64
	}{
		{"orders", "billing", "DESERIALIZATION_FAILED", avro.Permanent, store.StatePermanent, []byte(`{"order":1}`), 1},
		{"orders", "billing", "DESERIALIZATION_FAILED", avro.Permanent, store.StatePermanent, []byte("<script>alert(1)</script>"), 1},
		{"shipments", "shipping", "TIMEOUT", avro.Temporary, store.StateRetryPending, []byte{0x00, 0xff, 'h', 'i', 0x1b}, 2},
		{"shipments", "shipping", "TIMEOUT", avro.Temporary, store.StateResent, []byte("done"), 2},
	} {
		id := uuid.New()
		f.ids = append(f.ids, id)
		next := now.Add(time.Minute)
		d := &FailureDetail{
			FailureRow: FailureRow{
				ID: id, ReceivedAt: now.Add(time.Duration(i-10) * time.Minute), Topic: spec.topic, Partition: 0, Offset: int64(i),
				PublisherService: spec.service, MessageType: "OrderPlaced", ErrorCode: spec.code, ErrorMessage: "cannot decode <b>" + spec.topic + "</b>",
				Temporality: spec.temporality, State: spec.state, Attempt: 1,
			},
			StackTrace: "java.lang.IllegalStateException: boom\n\tat Foo.bar(Foo.java:1)", EventID: "ev-" + id.String(),
			IdempotenceID: "idem-" + id.String(), FailedAt: now, PublisherSystem: "shop", Value: spec.value,
			Key: []byte("key-" + spec.topic), Headers: []avro.Header{{Name: "trace", Value: []byte("abc")}, {Name: "nullh", Value: nil}},
			CausingMessage: spec.topic + "/0/" + id.String(), GroupID: spec.group, UpdatedAt: now,
		}
		if spec.state == store.StateRetryPending {
			d.NextAttemptAt = &next
		}
		b.add(d)
	}
	h, err := New(Config{
		Backend: b,
		Auth: fakeAuth{tokens: map[string]Principal{
			operatorToken: {Name: "olivia", Role: RoleOperator},
			viewerToken:   {Name: "victor", Role: RoleViewer},
		}, proxy: true},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:      func() time.Time { return now },
		PageSize: 2,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// client is a browser-like HTTP client with cookies that does not follow redirects.
type client struct {
	f   *fixture
	c   *http.Client
	hdr http.Header
}

func (f *fixture) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{f: f, hdr: http.Header{}, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (c *client) do(method, path string, form url.Values) (*http.Response, string) {
	c.f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.f.srv.URL+path, body)
	if err != nil {
		c.f.t.Fatal(err)
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the client's session, read from the page at path.
func (c *client) csrf(path string) string {
	c.f.t.Helper()
	_, body := c.do("GET", path, nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		c.f.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

func (c *client) login(token string) {
	c.f.t.Helper()
	tok := c.csrf("/login")
	resp, body := c.do("POST", "/login", url.Values{"csrf": {tok}, "token": {token}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		c.f.t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
}

func TestLoginFlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()

	resp, _ := c.do("GET", "/failures?state=PERMANENT", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Ffailures%3Fstate%3DPERMANENT" {
		t.Fatalf("anonymous list: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie = %+v", session)
	}
	resp, body := c.do("GET", "/login", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `name="token"`) {
		t.Fatalf("login page: %d", resp.StatusCode)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP = %q", csp)
	}

	tok := csrfRE.FindStringSubmatch(body)[1]
	resp, body = c.do("POST", "/login", url.Values{"csrf": {tok}, "token": {"wrong-token-000000000"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not valid") {
		t.Fatalf("bad token: %d", resp.StatusCode)
	}
	resp, _ = c.do("POST", "/login", url.Values{"csrf": {"forged"}, "token": {operatorToken}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login without CSRF token: %d", resp.StatusCode)
	}
	resp, _ = c.do("POST", "/login", url.Values{"csrf": {tok}, "token": {operatorToken}, "next": {"//evil.example/x"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == tokenCookie && (!ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value == operatorToken) {
			t.Fatalf("token cookie = %+v", ck)
		}
	}
	resp, body = c.do("GET", "/", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "olivia") || !strings.Contains(body, "<svg") {
		t.Fatalf("overview: %d", resp.StatusCode)
	}

	tok = csrfRE.FindStringSubmatch(body)[1]
	c.do("POST", "/logout", url.Values{"csrf": {tok}})
	if resp, _ := c.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
}

func TestTrustedProxy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.hdr.Set("X-Forwarded-User", "pat")
	resp, body := c.do("GET", "/failures", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "pat") || strings.Contains(body, "Sign out") {
		t.Fatalf("proxy user: %d", resp.StatusCode)
	}
	if strings.Contains(body, `id="bulk-retry"`) {
		t.Fatal("a viewer sees the bulk actions")
	}
}

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
		{"topic=shipments", []int{3, 2}}, // newest first
		{"topic=shipments&state=RETRY_PENDING", []int{2}},
		{"temporality=TEMPORARY&error_code=TIMEOUT&state=RESENT", []int{3}},
		{"q=%3Cb%3Eorders", []int{1, 0}},
		{"key=key-orders", []int{1, 0}},
		{"group_id=2&state=RETRY_PENDING", []int{2}},
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

	resp, body := c.do("GET", "/failures?state=BOGUS", nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "is not a state") {
		t.Fatalf("bad filter: %d", resp.StatusCode)
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
		`id="retry"`, // not for a viewer: checked below
	} {
		if want == `id="retry"` {
			if strings.Contains(body, want) {
				t.Error("a viewer sees the retry button")
			}
			continue
		}
		if !strings.Contains(body, want) {
			t.Errorf("detail lacks %q", want)
		}
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
	if resp, _ := c.do("GET", "/failures/"+uuid.NewString(), nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown id: %d", resp.StatusCode)
	}
}

func TestActionsNeedOperatorAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
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
	if d, _ := f.backend.Failure(t.Context(), f.ids[0]); d.State != store.StatePermanent {
		t.Fatalf("a refused close changed the state to %s", d.State)
	}

	// Confirmation with the dry-run count, then a close that needs a reason.
	resp, body := op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"close"}, "id": {f.ids[0].String(), f.ids[3].String()}})
	if resp.StatusCode != 200 || !strings.Contains(body, `<strong id="affected-count">1</strong> of the 2 selected`) {
		t.Fatalf("confirm: %d %s", resp.StatusCode, body)
	}
	resp, body = op.do("POST", "/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"  "}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "A reason is required") {
		t.Fatalf("close without reason: %d", resp.StatusCode)
	}
	resp, body = op.do("POST", "/failures/close", url.Values{"csrf": {tok}, "id": {f.ids[0].String()}, "reason": {"duplicate order"}})
	if resp.StatusCode != 200 || !strings.Contains(body, `<strong id="done-count">1</strong> closed`) {
		t.Fatalf("close: %d %s", resp.StatusCode, body)
	}
	_, body = op.do("GET", "/failures/"+f.ids[0].String(), nil)
	if !strings.Contains(body, "CLOSED") || !strings.Contains(body, "duplicate order") || !strings.Contains(body, "olivia") {
		t.Fatal("the detail does not show the close and its audit entry")
	}

	// All matching the filter.
	resp, body = op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"retry"}, "scope": {"all"}, "topic": {"shipments"}})
	if resp.StatusCode != 200 || !strings.Contains(body, `matches <strong id="affected-count">1</strong>`) ||
		!strings.Contains(body, `name="topic" value="shipments"`) {
		t.Fatalf("confirm all: %d %s", resp.StatusCode, body)
	}
	resp, body = op.do("POST", "/failures/retry", url.Values{"csrf": {tok}, "scope": {"all"}, "topic": {"shipments"}})
	if resp.StatusCode != 200 || !strings.Contains(body, `<strong id="done-count">1</strong> resent`) {
		t.Fatalf("retry all: %d %s", resp.StatusCode, body)
	}
	if len(f.backend.retried) != 1 || f.backend.retried[0] != f.ids[2] {
		t.Fatalf("retried %v, want %v", f.backend.retried, f.ids[2])
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
	resp, _ := c.do("POST", "/groups/2", url.Values{"csrf": {tok}, "ticket": {"https://issues.example/JIRA-1"}, "note": {"<i>upstream</i>"}, "back": {"/groups"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/groups?updated=2#group-2" {
		t.Fatalf("update: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = c.do("GET", "/groups?updated=2", nil)
	if !strings.Contains(body, `href="https://issues.example/JIRA-1"`) || !strings.Contains(body, "&lt;i&gt;upstream&lt;/i&gt;") {
		t.Fatal("the group does not show its ticket link and escaped note")
	}
	if resp, _ := c.do("POST", "/groups/99", url.Values{"csrf": {tok}, "ticket": {"x"}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown group: %d", resp.StatusCode)
	}
}

func TestStaticAndNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	resp, body := c.do("GET", "/static/app.js", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "use strict") || len(resp.Cookies()) != 0 {
		t.Fatalf("app.js: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := c.do("GET", "/static/", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("static directory listing: %d", resp.StatusCode)
	}
	c.login(viewerToken)
	if resp, _ := c.do("GET", "/nope", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown page: %d", resp.StatusCode)
	}
}
