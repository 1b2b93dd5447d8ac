package web

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/internal/testkit/storekit"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/operator"
)

// adminToken is the jobs fixture's admin, who may reactivate the dead-letter topic.
const adminToken = "admin-token-0123456789abcdef"

// jobsDeadLetterTopic is the jobs fixture's own dead-letter topic.
const jobsDeadLetterTopic = "redrive-dlt"

// newJobsFixture is the fixture with a core that also reactivates its dead-letter topic (a run
// is the store's, started as the intake's reactivator starts it, without reading Kafka) and an
// authenticator that also knows an admin. The core runs no jobs until runJobs.
func newJobsFixture(t *testing.T) *fixture { return newJobsFixtureWith(t, fixtureOptions{}, nil) }

// newJobsFixtureWith is newJobsFixture with opts and, when not nil, now as the UI's clock (the
// core's stays the real one); with opts.resend the core resends through a resender of its own
// over the fixture's Kafka.
func newJobsFixtureWith(t *testing.T, opts fixtureOptions, now func() time.Time) *fixture {
	t.Helper()
	f := newFixtureWith(t, opts)
	cfg := operator.Config{Store: f.store, MaxBulk: fixtureMaxBulk, Logger: quiet, DeadLetterTopic: jobsDeadLetterTopic,
		Reactivate: func(ctx context.Context, r operator.ReactivateRequest) (*redrive.Reactivation, error) {
			return storekit.StartReactivation(ctx, f.store, storekit.Reactivation{Topic: jobsDeadLetterTopic,
				Principal: r.Principal, Reason: r.Reason, Limit: r.Limit, UpToNow: r.UpToNow})
		}}
	if opts.resend {
		f.resender = startResender(t, f.store, f.kafka)
		cfg.Resender = f.resender
	}
	if opts.core != nil {
		opts.core(&cfg)
	}
	core, err := operator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokens("olivia:operator+payload:" + operatorToken + ",victor:viewer+payload:" + viewerToken +
		",ada:admin:" + adminToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, ProxyDefaultRole: auth.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	f.core = core
	sessions, err := auth.NewSessions(auth.SessionsConfig{Store: f.store, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if f.handler, err = New(Config{Core: core, Auth: a, Logger: quiet, PageSize: 2, Now: now, Sessions: sessions}); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.handler)
	t.Cleanup(f.srv.Close)
	return f
}

// runJobs runs the core's job runner until the test ends.
func (f *fixture) runJobs() {
	var pub jobs.Publisher
	if f.resender != nil {
		pub = f.resender
	}
	runner, err := jobs.New(jobs.Config{Store: f.store, Publisher: pub, Owner: "web-test", PollInterval: 20 * time.Millisecond})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			f.t.Errorf("job runner: %v", err)
		}
	})
}

// waitJob polls the job until it is in state, failing the test after a minute.
func (f *fixture) waitJob(id uuid.UUID, state redrive.JobState) *operator.JobView {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := f.core.Job(context.Background(), id, operator.Reader{})
		if err != nil {
			f.t.Fatal(err)
		}
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %s is %s (done %d of %d), want %s", id, j.State, j.Done, j.Total, state)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

var (
	tokenRE    = regexp.MustCompile(`name="token" value="([^"]+)"`)
	startURLRE = regexp.MustCompile(`action="/jobs/([0-9a-f-]{36})/start"`)
)

// preview posts a job preview and returns the job's id and token.
func (c *client) preview(form url.Values) (uuid.UUID, string, string) {
	c.f.t.Helper()
	resp, body := c.do("POST", "/jobs/preview", form)
	tm, sm := tokenRE.FindStringSubmatch(body), startURLRE.FindStringSubmatch(body)
	if resp.StatusCode != 200 || tm == nil || sm == nil {
		c.f.t.Fatalf("preview: %d %s", resp.StatusCode, body)
	}
	return uuid.MustParse(sm[1]), tm[1], body
}

// progress reads a progress endpoint.
func (c *client) progress(path string) progressJSON {
	c.f.t.Helper()
	resp, body := c.do("GET", path, nil)
	var p progressJSON
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		c.f.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		c.f.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
	return p
}

func jobPageHas(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %s:\n%s", what, w, body)
		}
	}
}

// A job acts on exactly the failures its preview pinned: one received after the preview is
// left alone, one whose state changed is skipped with the reason, and the start needs the
// preview's token.
func TestJobPreviewPinsAndStarts(t *testing.T) {
	t.Parallel()
	f := newJobsFixture(t)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/failures")
	sel := url.Values{"csrf": {tok}, "action": {"close"}, "scope": {"all"}, "state": {"PERMANENT", "RETRY_PENDING"}, "back": {"/failures"}}

	// The list offers the job next to the immediate action; the form asks for the reason and
	// the rate (200/s by default).
	_, body := op.do("GET", "/failures?state=PERMANENT", nil)
	jobPageHas(t, "the list", body, `formaction="/jobs/new" name="action" value="close" id="job-close"`, `<a href="/jobs" id="nav-jobs"`)
	resp, body := op.do("POST", "/jobs/new", sel)
	if resp.StatusCode != 200 {
		t.Fatalf("job form: %d %s", resp.StatusCode, body)
	}
	jobPageHas(t, "the job form", body, `id="job-form"`, `name="rate_limit" min="0" max="100000" step="any" value="200"`,
		`<code class="crit">state=PERMANENT</code>`, `<textarea id="reason" name="reason"`)
	if strings.Contains(body, `name="token"`) {
		t.Fatal("the job form carries a token before any preview")
	}

	// A close needs a reason: the form comes back with the core's message.
	resp, body = op.do("POST", "/jobs/preview", sel)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="job-error">reason: required`) || !strings.Contains(body, `id="job-form"`) {
		t.Fatalf("preview without reason: %d %s", resp.StatusCode, body)
	}
	form := url.Values{}
	for k, v := range sel {
		form[k] = v
	}
	form.Set("reason", "incident INC-7 <b>cleanup</b>")
	form.Set("rate_limit", "50")
	id, token, body := op.preview(form)
	jobPageHas(t, "the preview", body, `<strong id="pinned-count">3</strong> failures are pinned`,
		`id="pinned-rate">50 per second`, `incident INC-7 &lt;b&gt;cleanup&lt;/b&gt;`, `id="start-job"`)

	// After the preview: a new failure matches the filter, and a pinned one is closed by hand.
	late := testkit.InsertFailure(t, f.pool, testkit.FailureRow{State: redrive.StatePermanent, Topic: "orders"})
	if _, err := f.core.Act(context.Background(), operator.ActionRequest{Action: operator.Close, Principal: "olivia", Reason: "by hand",
		Selection: operator.Selection{IDs: []uuid.UUID{f.ids[1]}}}); err != nil {
		t.Fatal(err)
	}

	// A wrong token starts nothing; the preview's does, once.
	resp, body = op.do("POST", "/jobs/"+id.String()+"/start", url.Values{"csrf": {tok}, "token": {"AAAA" + token[4:]}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "token:") {
		t.Fatalf("start with a wrong token: %d %s", resp.StatusCode, body)
	}
	if resp, _ := op.do("POST", "/jobs/"+id.String()+"/start", url.Values{"token": {token}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("start without CSRF token: %d", resp.StatusCode)
	}
	resp, _ = op.do("POST", "/jobs/"+id.String()+"/start", url.Values{"csrf": {tok}, "token": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs/"+id.String() {
		t.Fatalf("start: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = op.do("POST", "/jobs/"+id.String()+"/start", url.Values{"csrf": {tok}, "token": {token}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "is RUNNING: cannot start") {
		t.Fatalf("second start: %d %s", resp.StatusCode, body)
	}

	f.runJobs()
	f.waitJob(id, redrive.JobDone)
	for i, want := range map[int]redrive.State{0: redrive.StateClosed, 1: redrive.StateClosed, 2: redrive.StateClosed, 3: redrive.StateResent} {
		if st := f.state(f.ids[i]); st != want {
			t.Errorf("failure %d is %s, want %s", i, st, want)
		}
	}
	if st := f.state(late); st != redrive.StatePermanent {
		t.Fatalf("the failure received after the preview is %s: the job acted on it", st)
	}

	// The job's page: counts, progress, items by outcome with paging, audit.
	_, body = op.do("GET", "/jobs/"+id.String(), nil)
	jobPageHas(t, "the job page", body, `data-field="state">DONE`, `id="job-bar" max="3" value="3"`, `<span data-field="percent">100</span> %`,
		`id="job-done" data-field="done">2`, `id="job-skipped" data-field="skipped">1`, `id="job-remaining" data-field="remaining">0`,
		`data-running="false"`, `job_start`, `id="item-audit">And 2 entries of the failures the job changed`, `<code class="crit">state=PERMANENT</code>`, `id="items-next"`)
	if strings.Contains(body, `id="job-pause"`) && !strings.Contains(body, `data-states="RUNNING" hidden`) {
		t.Error("a finished job offers a pause")
	}
	_, body = op.do("GET", "/jobs/"+id.String()+"?outcome=skipped", nil)
	jobPageHas(t, "the skipped items", body, `<a href="/failures/`+f.ids[1].String()+`">`, "state changed since the preview", `aria-current="page" id="items-skipped"`)
	_, body = op.do("GET", "/jobs/"+id.String(), nil)
	next := regexp.MustCompile(`href="(/jobs/[^"]+after=[0-9]+)" rel="next"`).FindStringSubmatch(body)
	if next == nil || strings.Count(body, `<tr data-id=`) != 2 {
		t.Fatalf("first page of items: %s", body)
	}
	_, body = op.do("GET", strings.ReplaceAll(next[1], "&amp;", "&"), nil)
	if strings.Count(body, `<tr data-id=`) != 1 || !strings.Contains(body, `id="items-first"`) || strings.Contains(body, `id="items-next"`) {
		t.Fatalf("second page of items: %s", body)
	}
	_, body = op.do("GET", "/jobs/"+id.String()+"?outcome=done", nil)
	if strings.Count(body, `<span class="outcome outcome-done">done</span>`) != 2 {
		t.Fatalf("done items: %s", body)
	}
	p := op.progress("/jobs/" + id.String() + "/progress")
	if p.State != "DONE" || p.Running || p.Value != 3 || p.Max != 3 || p.Fields["percent"] != "100" || p.Fields["skipped"] != "1" {
		t.Fatalf("progress: %+v", p)
	}
}

// Pause, resume and cancel: buttons for operators by the job's state, POSTs with CSRF, then
// back to the job; a state that does not allow the operation is a conflict with the core's
// text; viewers see no buttons and are refused.
func TestJobButtons(t *testing.T) {
	t.Parallel()
	f := newJobsFixture(t)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/jobs")
	id, token, _ := op.preview(url.Values{"csrf": {tok}, "action": {"close"}, "id": {f.ids[0].String(), f.ids[2].String()}, "reason": {"dupes"}})
	if resp, _ := op.do("POST", "/jobs/"+id.String()+"/start", url.Values{"csrf": {tok}, "token": {token}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	// No runner: the job stays RUNNING.
	_, body := op.do("GET", "/jobs/"+id.String(), nil)
	jobPageHas(t, "a running job", body, `data-running="true"`, `data-progress="/jobs/`+id.String()+`/progress"`,
		`data-states="RUNNING">`, `data-states="PAUSED" hidden>`, `id="job-cancel"`, `<code class="crit">2 selected failures</code>`)

	viewer := f.client()
	viewer.login(viewerToken)
	vtok := viewer.csrf("/jobs")
	_, body = viewer.do("GET", "/jobs/"+id.String(), nil)
	if strings.Contains(body, `id="job-pause"`) || strings.Contains(body, `id="job-cancel"`) || !strings.Contains(body, `data-field="state">RUNNING`) {
		t.Fatalf("the viewer's job page: %s", body)
	}
	if p := viewer.progress("/jobs/" + id.String() + "/progress"); !p.Running || p.Max != 2 {
		t.Fatalf("the viewer's progress: %+v", p)
	}
	for _, path := range []string{"/pause", "/cancel", "/start"} {
		if resp, _ := viewer.do("POST", "/jobs/"+id.String()+path, url.Values{"csrf": {vtok}, "token": {token}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d", path, resp.StatusCode)
		}
	}
	if resp, _ := viewer.do("POST", "/jobs/new", url.Values{"csrf": {vtok}, "action": {"close"}, "id": {f.ids[0].String()}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer job form: %d", resp.StatusCode)
	}
	if resp, _ := op.do("POST", "/jobs/"+id.String()+"/pause", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("pause without CSRF token: %d", resp.StatusCode)
	}
	if resp, _ := op.do("POST", "/jobs/"+id.String()+"/pause", url.Values{"csrf": {vtok}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("pause with another session's token: %d", resp.StatusCode)
	}
	if j, _ := f.core.Job(context.Background(), id, operator.Reader{}); j.State != redrive.JobRunning {
		t.Fatalf("refused POSTs changed the job to %s", j.State)
	}

	step := func(op2 string, status int, state redrive.JobState) string {
		t.Helper()
		resp, body := op.do("POST", "/jobs/"+id.String()+"/"+op2, url.Values{"csrf": {tok}})
		if resp.StatusCode != status {
			t.Fatalf("%s: %d %s", op2, resp.StatusCode, body)
		}
		if status == http.StatusSeeOther && resp.Header.Get("Location") != "/jobs/"+id.String() {
			t.Fatalf("%s redirects to %s", op2, resp.Header.Get("Location"))
		}
		if j, _ := f.core.Job(context.Background(), id, operator.Reader{}); j.State != state {
			t.Fatalf("after %s the job is %s, want %s", op2, j.State, state)
		}
		return body
	}
	step("pause", http.StatusSeeOther, redrive.JobPaused)
	_, body = op.do("GET", "/jobs/"+id.String(), nil)
	jobPageHas(t, "a paused job", body, `data-field="state">PAUSED`, `data-states="RUNNING" hidden>`, `data-states="PAUSED">`, `data-running="false"`)
	body = step("pause", http.StatusConflict, redrive.JobPaused)
	jobPageHas(t, "a second pause", body, "is PAUSED: cannot pause")
	step("resume", http.StatusSeeOther, redrive.JobRunning)
	step("cancel", http.StatusSeeOther, redrive.JobCanceled)
	step("resume", http.StatusConflict, redrive.JobCanceled)
	_, body = op.do("GET", "/jobs/"+id.String(), nil)
	jobPageHas(t, "a canceled job", body, `data-field="state">CANCELED`, "job_pause", "job_resume", "job_cancel", "olivia")
	if strings.Contains(body, `<form method="post" action="/jobs/`+id.String()+`/cancel" class="inline" data-states="PREVIEW RUNNING PAUSED">`) {
		t.Error("a canceled job offers a cancel")
	}
	if st := f.state(f.ids[0]); st != redrive.StatePermanent {
		t.Errorf("a job that never ran changed a failure to %s", st)
	}
}

// The job list, newest first with paging; bad addresses and bad input get clear messages.
func TestJobsListAndInput(t *testing.T) {
	t.Parallel()
	f := newJobsFixture(t)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/jobs")
	var ids []uuid.UUID
	for range 3 {
		id, _, _ := op.preview(url.Values{"csrf": {tok}, "action": {"close"}, "id": {f.ids[0].String()}, "reason": {"r"}})
		ids = append(ids, id)
	}
	viewer := f.client()
	viewer.login(viewerToken)
	_, body := viewer.do("GET", "/jobs", nil)
	_, jb := viewer.do("GET", "/jobs/"+ids[0].String(), nil)
	jobPageHas(t, "a preview's page", jb, `id="job-preview-note">This job is a preview`)
	if strings.Count(body, `<tr data-id=`) != 2 || !strings.Contains(body, `<tr data-id="`+ids[2].String()+`"`) ||
		!strings.Contains(body, `aria-current="page">Jobs</a>`) || !strings.Contains(body, `PREVIEW`) {
		t.Fatalf("first page of jobs: %s", body)
	}
	next := regexp.MustCompile(`href="(/jobs\?cursor=[^"]+)" rel="next"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatalf("no next page: %s", body)
	}
	_, body = viewer.do("GET", strings.ReplaceAll(next[1], "&amp;", "&"), nil)
	if strings.Count(body, `<tr data-id=`) != 1 || !strings.Contains(body, `<tr data-id="`+ids[0].String()+`"`) || !strings.Contains(body, `id="first-page"`) {
		t.Fatalf("second page of jobs: %s", body)
	}

	for _, c := range []struct {
		name   string
		method string
		path   string
		form   url.Values
		status int
		want   string
	}{
		{"rate not a number", "POST", "/jobs/preview", url.Values{"action": {"retry"}, "id": {f.ids[0].String()}, "rate_limit": {"fast"}}, 400, `rate_limit: &#34;fast&#34; is not a number`},
		{"rate too high", "POST", "/jobs/preview", url.Values{"action": {"close"}, "reason": {"r"}, "id": {f.ids[0].String()}, "rate_limit": {"1e9"}}, 400, "rate_limit: 1e&#43;09 items per second is not between"},
		{"empty filter", "POST", "/jobs/preview", url.Values{"action": {"close"}, "reason": {"r"}, "scope": {"all"}}, 400, "filter: empty: a job by filter needs at least one criterion"},
		{"bad filter", "POST", "/jobs/new", url.Values{"action": {"close"}, "scope": {"all"}, "state": {"GONE"}}, 400, "state:"},
		{"retry without resender", "POST", "/jobs/preview", url.Values{"action": {"retry"}, "id": {f.ids[0].String()}}, 503, "cannot do this now"},
		{"bad outcome", "GET", "/jobs/" + ids[0].String() + "?outcome=lost", nil, 400, "outcome: &#34;lost&#34; is not done, skipped, failed or pending"},
		{"bad after", "GET", "/jobs/" + ids[0].String() + "?after=x", nil, 400, "after: not a position"},
		{"unknown job", "GET", "/jobs/" + uuid.NewString(), nil, 404, "There is no job with this id."},
		{"not a job id", "GET", "/jobs/123", nil, 404, "There is no job with this id."},
		{"unknown job's progress", "GET", "/jobs/" + uuid.NewString() + "/progress", nil, 404, "no such job"},
		{"bad cursor", "GET", "/jobs?cursor=zzz", nil, 400, "This page address is not valid"},
		{"start an unknown job", "POST", "/jobs/" + uuid.NewString() + "/start", url.Values{"token": {"x"}}, 400, "token: not a job token"},
		{"pause an unknown job", "POST", "/jobs/" + uuid.NewString() + "/pause", url.Values{}, 404, "There is no job with this id."},
	} {
		form := c.form
		if form != nil {
			form.Set("csrf", tok)
		}
		resp, body := op.do(c.method, c.path, form)
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d, want %d with %q:\n%s", c.name, resp.StatusCode, c.status, c.want, body)
		}
	}

	// Unauthenticated: pages go to the login, the progress too.
	anon := f.client()
	if resp, _ := anon.do("GET", "/jobs/"+ids[0].String()+"/progress", nil); resp.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Errorf("anonymous progress: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Over the bulk cap the confirmation steers to a job with the same selection.
func TestConfirmOverCapOffersJob(t *testing.T) {
	t.Parallel()
	f := newJobsFixture(t)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/failures")
	over := url.Values{"csrf": {tok}, "action": {"close"}, "scope": {"all"}, "state": {"PERMANENT", "RETRY_PENDING"}, "back": {"/failures"}}
	resp, body := op.do("POST", "/failures/confirm", over)
	if resp.StatusCode != 200 {
		t.Fatalf("confirm: %d %s", resp.StatusCode, body)
	}
	jobPageHas(t, "the confirmation over the cap", body, `id="over-cap"`, `<form method="post" action="/jobs/new" id="as-job-form">`, `id="as-job"`)
	under := url.Values{"csrf": {tok}, "action": {"close"}, "scope": {"all"}, "topic": {"shipments"}}
	if _, body := op.do("POST", "/failures/confirm", under); strings.Contains(body, `id="as-job-form"`) {
		t.Error("the confirmation under the cap offers a job instead of the action")
	}
	// The steered form leads to the job form with the same selection.
	over.Set("reason", "too many")
	resp, body = op.do("POST", "/jobs/new", over)
	if resp.StatusCode != 200 {
		t.Fatalf("job form: %d %s", resp.StatusCode, body)
	}
	jobPageHas(t, "the job form", body, `<input type="hidden" name="state" value="PERMANENT">`, `<input type="hidden" name="state" value="RETRY_PENDING">`, ">too many</textarea>")
	viewer := f.client()
	viewer.login(viewerToken)
	if _, body := viewer.do("GET", "/failures", nil); strings.Contains(body, `id="job-close"`) {
		t.Error("a viewer sees the job buttons")
	}
}

// Reactivation of the own dead-letter topic: everyone sees the runs, only admins start one;
// bad input and a run already going get the core's message; the run's page shows progress.
func TestReactivationPage(t *testing.T) {
	t.Parallel()
	f := newJobsFixture(t)
	viewer, op, admin := f.client(), f.client(), f.client()
	viewer.login(viewerToken)
	op.login(operatorToken)
	admin.login(adminToken)
	for _, c := range []*client{viewer, op} {
		tok := c.csrf("/dead-letters")
		_, body := c.do("GET", "/dead-letters", nil)
		if strings.Contains(body, `id="reactivate-form"`) || !strings.Contains(body, "No reactivation yet.") {
			t.Errorf("a non-admin's page: %s", body)
		}
		if resp, _ := c.do("POST", "/dead-letters", url.Values{"csrf": {tok}, "scope": {"now"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a non-admin's reactivation: %d", resp.StatusCode)
		}
	}
	tok := admin.csrf("/dead-letters")
	_, body := admin.do("GET", "/dead-letters", nil)
	jobPageHas(t, "the admin's page", body, `id="reactivate-form"`, `id="nav-dead-letters" aria-current="page"`)
	if resp, _ := admin.do("POST", "/dead-letters", url.Values{"scope": {"now"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reactivation without CSRF token: %d", resp.StatusCode)
	}
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"scope": {"limit"}, "limit": {"abc"}}, `limit: &#34;abc&#34; is not a whole number of records`},
		{url.Values{"scope": {"limit"}}, "limit: give a limit"},
		{url.Values{"scope": {"limit"}, "limit": {"-4"}}, "limit: -4 is not from 1 to"},
		{url.Values{"scope": {"sideways"}}, "scope: choose"},
	} {
		c.form.Set("csrf", tok)
		resp, body := admin.do("POST", "/dead-letters", c.form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="reactivate-error">`+c.want) || !strings.Contains(body, `id="reactivate-form"`) {
			t.Errorf("%v: %d, want 400 with %q:\n%s", c.form, resp.StatusCode, c.want, body)
		}
	}
	resp, _ := admin.do("POST", "/dead-letters", url.Values{"csrf": {tok}, "scope": {"limit"}, "limit": {"100"}, "reason": {"registry is back"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !regexp.MustCompile(`^/dead-letters/[0-9]+$`).MatchString(loc) {
		t.Fatalf("reactivate: %d %s", resp.StatusCode, loc)
	}
	resp, body = admin.do("POST", "/dead-letters", url.Values{"csrf": {tok}, "scope": {"now"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `id="reactivate-error">A reactivation cannot start now:`) {
		t.Fatalf("a second run: %d %s", resp.StatusCode, body)
	}

	_, body = viewer.do("GET", loc, nil)
	jobPageHas(t, "the run's page", body, `data-running="true"`, `data-progress="`+loc+`/progress"`, `id="run-reason">registry is back`,
		"dlt_reactivate_start", `<progress id="run-bar" max="100" value="0"`, "100 records")
	_, body = viewer.do("GET", "/dead-letters", nil)
	jobPageHas(t, "the runs", body, `<a href="`+loc+`">`, "RUNNING", "ada")

	runs, err := f.core.Reactivations(context.Background(), 10, "")
	if err != nil || len(runs.Items) != 1 || runs.Next != "" {
		t.Fatalf("runs %v %v", runs, err)
	}
	id := runs.Items[0].ID
	if err := f.store.RecordReactivationStep(context.Background(), redrive.ReactivationStep{ID: id, Read: 40, Reingested: 30, Duplicates: 5, StillFailing: 5}); err != nil {
		t.Fatal(err)
	}
	p := viewer.progress(loc + "/progress")
	if !p.Running || p.Value != 40 || p.Max != 100 || p.Fields["percent"] != "40" || p.Fields["still_failing"] != "5" {
		t.Fatalf("progress: %+v", p)
	}
	if _, err := f.store.FinishReactivation(context.Background(), id, redrive.ReactivationFailed, "brokers silent \u202e"); err != nil {
		t.Fatal(err)
	}
	p = viewer.progress(loc + "/progress")
	if p.Running || p.State != "FAILED" || p.Fields["error"] != "brokers silent ⟨U+202E⟩" {
		t.Fatalf("progress of a failed run: %+v", p)
	}
	_, body = viewer.do("GET", loc, nil)
	jobPageHas(t, "a failed run's page", body, `data-running="false"`, "brokers silent ⟨U&#43;202E⟩", "dlt_reactivate_end")
	if strings.Contains(body, "\u202e") {
		t.Error("the run's page shows a bidirectional override raw")
	}
	// Three runs, two per page: the older one is a page further.
	for range 2 {
		resp, _ := admin.do("POST", "/dead-letters", url.Values{"csrf": {tok}, "scope": {"now"}})
		next := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("another run: %d", resp.StatusCode)
		}
		runID, _ := strconv.ParseInt(strings.TrimPrefix(next, "/dead-letters/"), 10, 64)
		if _, err := f.store.FinishReactivation(context.Background(), runID, redrive.ReactivationDone, ""); err != nil {
			t.Fatal(err)
		}
	}
	_, body = viewer.do("GET", "/dead-letters", nil)
	older := regexp.MustCompile(`<a href="(/dead-letters\?cursor=[^"]+)" rel="next" id="next-page">Older runs</a>`).FindStringSubmatch(body)
	if older == nil || strings.Contains(body, `href="`+loc+`"`) {
		t.Fatalf("the first page of runs has no link to older runs, or shows the oldest:\n%s", body)
	}
	_, body = viewer.do("GET", html.UnescapeString(older[1]), nil)
	jobPageHas(t, "the older runs", body, `<a href="`+loc+`">`, `id="first-page"`)
	if strings.Contains(body, `id="next-page"`) {
		t.Error("the last page of runs links to a next one")
	}
	if resp, body := viewer.do("GET", "/dead-letters?cursor=nonsense", nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not a reactivation list cursor") {
		t.Errorf("a bad cursor: %d %s", resp.StatusCode, body)
	}
	for path, status := range map[string]int{"/dead-letters/0": 404, "/dead-letters/x": 404, "/dead-letters/999": 404, "/dead-letters/999/progress": 404} {
		if resp, _ := viewer.do("GET", path, nil); resp.StatusCode != status {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, status)
		}
	}
}

// A retry job resends each pinned failure's original record, as the immediate retry does.
func TestJobRetryResends(t *testing.T) {
	t.Parallel()
	f := newJobsFixtureWith(t, fixtureOptions{resend: true}, nil)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/failures")
	if _, body := op.do("GET", "/failures", nil); !strings.Contains(body, `id="job-retry"`) {
		t.Fatal("a server that resends offers no retry job")
	}
	id, token, body := op.preview(url.Values{"csrf": {tok}, "action": {"retry"}, "scope": {"all"}, "topic": {"shipments"}})
	jobPageHas(t, "the retry preview", body, `<strong id="pinned-count">1</strong> failure is pinned`, `id="pinned-reason"><span class="note">none</span>`)
	if resp, _ := op.do("POST", "/jobs/"+id.String()+"/start", url.Values{"csrf": {tok}, "token": {token}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	f.runJobs()
	f.waitJob(id, redrive.JobDone)
	if st := f.state(f.ids[2]); st != redrive.StateResent {
		t.Fatalf("the retried failure is %s", st)
	}
	msgs := f.kafka.ConsumeN(t, "shipments", 1, 30*time.Second)
	if string(msgs[0].Value) != "\x00\xffhi\x1b" || string(msgs[0].Key) != "key-shipments" {
		t.Fatalf("republished key %q value %q", msgs[0].Key, msgs[0].Value)
	}
}

// A preview whose token expired says so on the list and on its page.
func TestJobPreviewExpired(t *testing.T) {
	t.Parallel()
	f := newJobsFixture(t)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/jobs")
	id, _, _ := op.preview(url.Values{"csrf": {tok}, "action": {"close"}, "id": {f.ids[0].String()}, "reason": {"r"}})
	f.exec(`UPDATE jobs SET preview_expires_at = now() - interval '1 minute' WHERE id = $1`, id)
	_, body := op.do("GET", "/jobs", nil)
	jobPageHas(t, "the list", body, `PREVIEW</span> <span class="note">expired</span>`)
	_, body = op.do("GET", "/jobs/"+id.String(), nil)
	jobPageHas(t, "the preview's page", body, "and the preview expired at")
}

// On a deployment of several clusters the retry job form offers a destination: the repair
// topics, and the clusters the core allows for the selection (its own, or along a
// cross_cluster route from every cluster the selection may hold). A retry sent elsewhere is a
// resend_to job that names its topic and cluster on its preview, its page and the list; a
// cluster the routes do not allow is refused with the core's reason, naming the field.
func TestJobFormTargetCluster(t *testing.T) {
	t.Parallel()
	routes := map[[2]string]bool{{"default", "east"}: true, {"west", "east"}: true}
	f := newJobsFixtureWith(t, fixtureOptions{resend: true, core: func(c *operator.Config) {
		c.Clusters = []string{"default", "east", "west"}
		c.CrossCluster = func(from, to string) bool { return routes[[2]string{from, to}] }
		c.RepairTopics = []string{"shipments-replay"}
	}}, nil)
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/failures")
	options := regexp.MustCompile(`(?s)<select id="target-cluster" name="target_cluster">(.*?)</select>`)
	offered := func(body string) []string {
		t.Helper()
		m := options.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("the job form offers no target cluster:\n%s", body)
		}
		var out []string
		for _, v := range regexp.MustCompile(`<option value="([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
			out = append(out, v[1])
		}
		return out
	}
	form := func(extra ...string) url.Values {
		v := url.Values{"csrf": {tok}, "action": {"retry"}, "scope": {"all"}, "topic": {"shipments"}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Add(extra[i], extra[i+1])
		}
		return v
	}

	// Failures of any cluster: only east is reachable from all three.
	resp, body := op.do("POST", "/jobs/new", form())
	if resp.StatusCode != 200 {
		t.Fatalf("job form: %d %s", resp.StatusCode, body)
	}
	if got := strings.Join(offered(body), ","); got != ",east" {
		t.Errorf("target clusters offered for every cluster %q, want \",east\"", got)
	}
	jobPageHas(t, "the job form", body, `<select id="target-topic" name="target_topic">`, `<option value="shipments-replay">`)
	// The default cluster's failures: their own cluster and east.
	if _, body = op.do("POST", "/jobs/new", form("cluster", "default")); strings.Join(offered(body), ",") != ",default,east" {
		t.Errorf("target clusters offered for cluster default %q", offered(body))
	}

	id, _, body := op.preview(form("target_topic", "shipments-replay", "target_cluster", "east"))
	jobPageHas(t, "the resend preview", body, "<h1>Resend as a job</h1>", `resends exactly these to topic <code id="pinned-topic">shipments-replay</code>`,
		`on cluster <span class="badge cluster" id="pinned-cluster">east</span>`, `<option value="east" selected>`)
	j, err := f.core.Job(context.Background(), id, operator.Reader{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Action != string(operator.ResendTo) || j.TargetTopic == nil || *j.TargetTopic != "shipments-replay" || j.TargetCluster == nil || *j.TargetCluster != "east" {
		t.Fatalf("previewed job %s to %v @ %v", j.Action, j.TargetTopic, j.TargetCluster)
	}
	_, body = op.do("GET", "/jobs/"+id.String(), nil)
	jobPageHas(t, "the job page", body, "Resend job", `<dd id="job-target-topic"><code>shipments-replay</code></dd>`,
		`<dd id="job-target-cluster"><span class="badge cluster">east</span></dd>`)
	_, body = op.do("GET", "/jobs", nil)
	jobPageHas(t, "the job list", body, `resend_to <span class="note job-target">→ shipments-replay @ east</span>`)

	// Refusals come back to the form with the core's reason and the field.
	for _, c := range []struct{ topic, cluster, want string }{
		{"shipments-replay", "west", `target_cluster: resends from cluster &#34;default&#34; to cluster &#34;west&#34; are not allowed`},
		{"shipments-replay", "<b>x</b>", `target_cluster: &#34;&lt;b&gt;x&lt;/b&gt;&#34; is not a configured cluster`},
		{"", "east", "target_topic: required to resend to another topic"},
		{"<script>", "", `target_topic: &#34;&lt;script&gt;&#34; is not among the topics`},
	} {
		resp, body := op.do("POST", "/jobs/preview", form("target_topic", c.topic, "target_cluster", c.cluster))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("preview to %q @ %q: %d, want 400 with %s:\n%s", c.topic, c.cluster, resp.StatusCode, c.want, body)
		}
		if strings.Contains(body, "<b>x</b>") || strings.Contains(body, "<script>\"") {
			t.Errorf("preview to %q @ %q renders the input unescaped", c.topic, c.cluster)
		}
	}

	// A single-cluster deployment asks for no cluster.
	g := newJobsFixtureWith(t, fixtureOptions{resend: true, core: func(c *operator.Config) { c.RepairTopics = []string{"shipments-replay"} }}, nil)
	op = g.client()
	op.login(operatorToken)
	tok = op.csrf("/failures")
	if _, body = op.do("POST", "/jobs/new", form()); strings.Contains(body, "target-cluster") || !strings.Contains(body, "target-topic") {
		t.Errorf("the single-cluster job form:\n%s", body)
	}
}
