package web

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redrive/redrive"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/redrive/redrive/operator"
)

// TestBrowserJob starts a job from the failure list in headless Chromium, lands on the job's
// page and watches its progress bar reach 100 % without a reload: the page's script polls the
// job's progress.
func TestBrowserJob(t *testing.T) {
	startBrowser(t) // fail fast without a browser
	f := newJobsFixture(t)
	base := f.srv.URL
	ctx := tab(t)
	login(t, ctx, base, operatorToken)

	// All open failures matching the filter, as a job: the form, then the preview.
	do(t, ctx, chromedp.Navigate(base+"/failures?state=PERMANENT&state=RETRY_PENDING"), chromedp.WaitVisible(chromedp.ID("scope-all")),
		chromedp.Click(chromedp.ID("scope-all")))
	waitUntil(t, ctx, "the job button to be enabled", `!document.getElementById("job-close").disabled`)
	clickAndWait(t, ctx, "#job-close")
	if got := text(t, ctx, "h1"); got != "Close as a job" {
		t.Fatalf("job form titled %q", got)
	}
	if rate := eval[string](t, ctx, `document.getElementById("rate").value`); rate != "200" {
		t.Fatalf("default rate %q, want 200", rate)
	}
	do(t, ctx, chromedp.SendKeys(chromedp.ID("reason"), "incident INC-9: orders replayed upstream"))
	clickAndWait(t, ctx, "#preview-job")
	if got := text(t, ctx, "#pinned-count"); got != "3" {
		t.Fatalf("pinned %s failures, want 3", got)
	}
	screenshot(t, ctx, "job-preview.png")
	startJob(t, ctx)
	if got := text(t, ctx, "#job-state"); got != "RUNNING" {
		t.Fatalf("the job is %s, want RUNNING (no runner yet)", got)
	}
	if pct := text(t, ctx, "#job-percent"); pct != "0 %" {
		t.Fatalf("progress %q before the runner starts", pct)
	}
	// A mark on this document: a reload would drop it.
	eval[bool](t, ctx, `(window.redriveTestMark = true)`)

	// The runner starts now; the page follows without a reload.
	f.runJobs()
	waitUntil(t, ctx, "the progress bar to reach 100 %",
		`document.getElementById("job-bar").value === 3 && document.querySelector("#job-percent [data-field=percent]").textContent === "100"`)
	if !eval[bool](t, ctx, `window.redriveTestMark === true`) {
		t.Fatal("the page was reloaded")
	}
	waitUntil(t, ctx, "the state to show DONE", `document.getElementById("job-state").textContent === "DONE"`)
	for sel, want := range map[string]string{"#job-done": "3", "#job-remaining": "0", "#job-skipped": "0"} {
		if got := text(t, ctx, sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	if eval[bool](t, ctx, `!document.querySelector("form[action$='/pause']").hidden`) {
		t.Error("a finished job still offers a pause")
	}
	if !eval[bool](t, ctx, `!document.getElementById("job-reload").hidden`) {
		t.Error("the page does not say to reload for the items")
	}
	for i := range 3 {
		if st := f.state(f.ids[i]); st != redrive.StateClosed {
			t.Errorf("failure %d is %s after the job", i, st)
		}
	}
	clickAndWait(t, ctx, "#job-reload a")
	if n := eval[float64](t, ctx, `document.querySelectorAll("#job-items tbody tr[data-id]").length`); n != 2 {
		t.Fatalf("the first page of items shows %v rows, want 2", n)
	}
	screenshot(t, ctx, "job.png")
	do(t, ctx, chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.ID("jobs")))
	if got := text(t, ctx, "#jobs tbody tr:first-child td:nth-child(3)"); !strings.Contains(got, "DONE") {
		t.Errorf("the job list shows %q", got)
	}
	screenshot(t, ctx, "jobs.png")
}

// TestBrowserReactivation starts a reactivation as an admin and watches its page follow the
// run's progress without a reload, with the job page's polling.
func TestBrowserReactivation(t *testing.T) {
	startBrowser(t)
	f := newJobsFixture(t)
	base := f.srv.URL
	ctx := tab(t)
	login(t, ctx, base, adminToken)
	do(t, ctx, chromedp.Navigate(base+"/dead-letters"), chromedp.WaitVisible(chromedp.ID("reactivate-form")),
		chromedp.SendKeys(chromedp.ID("limit"), "100"),
		chromedp.SendKeys(chromedp.ID("reason"), "schema registry is back"))
	clickAndWait(t, ctx, "#reactivate")
	loc := run(t, ctx, chromedp.Location())
	m := regexp.MustCompile(`/dead-letters/([0-9]+)$`).FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("after the start at %s, want the run's page", loc)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	if got := text(t, ctx, "#run-state"); got != "RUNNING" {
		t.Fatalf("the run is %s", got)
	}
	eval[bool](t, ctx, `(window.redriveTestMark = true)`)
	if err := f.store.RecordReactivationStep(context.Background(), redrive.ReactivationStep{ID: id, Read: 40, Reingested: 38, StillFailing: 2}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the read count to reach 40", `document.getElementById("run-read").textContent === "40" && document.getElementById("run-bar").value === 40`)
	if _, err := f.store.FinishReactivation(context.Background(), id, redrive.ReactivationDone, ""); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the run to show DONE at 100 %",
		`document.getElementById("run-state").textContent === "DONE" && document.querySelector("#run-percent [data-field=percent]").textContent === "100"`)
	if !eval[bool](t, ctx, `window.redriveTestMark === true`) {
		t.Fatal("the page was reloaded")
	}
	if got := text(t, ctx, "#run-reingested"); got != "38" {
		t.Errorf("re-ingested %q, want 38", got)
	}
	do(t, ctx, chromedp.Navigate(base+"/dead-letters"), chromedp.WaitVisible(chromedp.ID("runs")))
	screenshot(t, ctx, "dead-letters.png")
}

// TestBrowserJobTargetCluster retries the failures of a filter as a job sent to another
// cluster in headless Chromium: the form offers the clusters the routes allow, the preview
// pins the job with its topic and cluster, and the job's page shows them.
func TestBrowserJobTargetCluster(t *testing.T) {
	startBrowser(t)
	f := newJobsFixtureWith(t, fixtureOptions{resend: true, core: func(c *operator.Config) {
		c.Clusters = []string{"default", "east"}
		c.CrossCluster = func(from, to string) bool { return from == "default" && to == "east" }
		c.RepairTopics = []string{"shipments-replay"}
	}}, nil)
	base := f.srv.URL
	ctx := tab(t)
	login(t, ctx, base, operatorToken)

	do(t, ctx, chromedp.Navigate(base+"/failures?topic=shipments&cluster=default"), chromedp.WaitVisible(chromedp.ID("scope-all")),
		chromedp.Click(chromedp.ID("scope-all")))
	waitUntil(t, ctx, "the job button to be enabled", `!document.getElementById("job-retry").disabled`)
	clickAndWait(t, ctx, "#job-retry")
	if got := text(t, ctx, "h1"); got != "Retry as a job" {
		t.Fatalf("job form titled %q", got)
	}
	if got := eval[string](t, ctx, `[...document.querySelectorAll("#target-cluster option")].map(o => o.value).join(",")`); got != ",default,east" {
		t.Fatalf("target clusters offered %q, want \",default,east\"", got)
	}
	do(t, ctx, chromedp.SetValue(chromedp.ID("target-topic"), "shipments-replay"),
		chromedp.SetValue(chromedp.ID("target-cluster"), "east"))
	clickAndWait(t, ctx, "#preview-job")
	if got := text(t, ctx, "h1"); got != "Resend as a job" {
		t.Fatalf("preview titled %q", got)
	}
	if got := text(t, ctx, "#pinned-cluster"); got != "east" {
		t.Fatalf("pinned cluster %q, want east", got)
	}
	if got := text(t, ctx, "#pinned-count"); got != "1" {
		t.Fatalf("pinned %s failures, want 1", got)
	}
	id := startJob(t, ctx)
	if got := text(t, ctx, "#job-target-cluster"); got != "east" {
		t.Errorf("the job page's cluster %q, want east", got)
	}
	if got := text(t, ctx, "#job-target-topic"); got != "shipments-replay" {
		t.Errorf("the job page's topic %q", got)
	}
	j, err := f.core.Job(context.Background(), id, operator.Reader{})
	if err != nil {
		t.Fatal(err)
	}
	if j.TargetCluster == nil || *j.TargetCluster != "east" || j.State != redrive.JobRunning {
		t.Errorf("started job %s to cluster %v", j.State, j.TargetCluster)
	}
	screenshot(t, ctx, "job-target-cluster.png")
}

// startJob clicks the preview's start button and returns the id of the job whose page the
// browser is on then.
func startJob(t *testing.T, ctx context.Context) uuid.UUID {
	t.Helper()
	clickAndWait(t, ctx, "#start-job")
	loc := run(t, ctx, chromedp.Location())
	m := regexp.MustCompile(`/jobs/([0-9a-f-]{36})$`).FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("after the start at %s, want the job's page", loc)
	}
	return uuid.MustParse(m[1])
}
