package web

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/operator"
)

// The repair form as the browser renders and submits it (multipart, with the CSRF token in
// its hidden field): an edit of the text, then an uploaded file; each is stored as a revision
// and resent.
func TestBrowserRepair(t *testing.T) {
	startBrowser(t)
	f := newFixtureWith(t, fixtureOptions{resend: true, web: func(c *Config) { c.RepairRole = auth.RoleOperator }})
	base := f.srv.URL
	ctx := tab(t)
	login(t, ctx, base, operatorToken)

	t.Run("EditedText", func(t *testing.T) {
		page := base + "/failures/" + f.ids[0].String() + "/repair" // {"order":1}
		do(t, ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("repair-form")))
		if got := eval[string](t, ctx, `document.getElementById("value").value`); !strings.Contains(got, `"order": 1`) {
			t.Fatalf("the form starts from %q, want the original", got)
		}
		do(t, ctx,
			chromedp.SetValue(chromedp.ID("value"), `{"order": 7}`),
			chromedp.SendKeys(chromedp.ID("repair-reason"), "order number typo"),
		)
		clickAndWait(t, ctx, "#repair-submit")
		mustShowRevision(t, ctx)
		if loc := run(t, ctx, chromedp.Location()); !strings.Contains(loc, "?revision=") {
			t.Fatalf("after the repair the browser is at %s", loc)
		}
		rec := f.kafka.ConsumeN(t, "orders", 1, time.Minute)
		if string(rec[0].Value) != `{"order": 7}` {
			t.Errorf("resent value = %q", rec[0].Value)
		}
		if st := f.state(f.ids[0]); st != redrive.StateResent {
			t.Errorf("state after the repair = %s, want RESENT", st)
		}
	})

	t.Run("UploadedFile", func(t *testing.T) {
		page := base + "/failures/" + f.ids[1].String() + "/repair"
		file := filepath.Join(t.TempDir(), "fixed.bin")
		upload := []byte{0x00, 0x01, 0xfe, 0xff, '\n', 'o', 'k'}
		if err := os.WriteFile(file, upload, 0o600); err != nil {
			t.Fatal(err)
		}
		do(t, ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("repair-form")),
			chromedp.SetUploadFiles(chromedp.ID("upload"), []string{file}),
			chromedp.SendKeys(chromedp.ID("repair-reason"), "replaced by the fixed bytes"),
		)
		clickAndWait(t, ctx, "#repair-submit")
		mustShowRevision(t, ctx)
		revs, err := f.core.Revisions(context.Background(), f.ids[1], operator.Reader{Payload: true})
		if err != nil || len(revs) != 1 {
			t.Fatalf("revisions = %d, %v", len(revs), err)
		}
		if string(revs[0].Value) != string(upload) || revs[0].Reason != "replaced by the fixed bytes" {
			t.Errorf("revision = %q (%q), want the uploaded bytes", revs[0].Value, revs[0].Reason)
		}
		rec := f.kafka.ConsumeN(t, "orders", 2, time.Minute)
		if string(rec[1].Value) != string(upload) {
			t.Errorf("resent value = %q, want the uploaded bytes", rec[1].Value)
		}
	})
}

// The repair form of a masked record, submitted by the browser as rendered: it starts empty
// (never from the asterisks) and the repair resends the original bytes.
func TestBrowserRepairMasked(t *testing.T) {
	startBrowser(t)
	f, ids := newMaskedFixture(t)
	ctx := tab(t)
	login(t, ctx, f.srv.URL, operatorToken)
	do(t, ctx, chromedp.Navigate(f.srv.URL+"/failures/"+ids[0].String()+"/repair"), chromedp.WaitVisible(chromedp.ID("repair-form")))
	if got := eval[string](t, ctx, `document.getElementById("value").value + "|" + document.getElementById("value-format").value`); got != "|" {
		t.Fatalf("the masked form starts from %q, want nothing (the original kept)", got)
	}
	if eval[bool](t, ctx, `document.getElementById("headers-edit") !== null`) {
		t.Error("the masked form offers the headers")
	}
	do(t, ctx, chromedp.SendKeys(chromedp.ID("repair-reason"), "resend as it is"))
	clickAndWait(t, ctx, "#repair-submit")
	mustShowRevision(t, ctx)
	if rec := f.kafka.ConsumeN(t, "secrets", 1, time.Minute)[0]; string(rec.Value) != `{"ssn":"`+secretSSN+`","order":3}` {
		t.Errorf("resent value = %q, want the original", rec.Value)
	}
}

// mustShowRevision fails the test unless the page is the repair page showing the revision just
// made.
func mustShowRevision(t *testing.T, ctx context.Context) {
	t.Helper()
	if !eval[bool](t, ctx, `document.querySelector("#revisions li.shown") !== null`) {
		t.Fatalf("after the repair the page is %s: %s", run(t, ctx, chromedp.Location()), eval[string](t, ctx, `document.body.innerText`))
	}
}
