package web

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redrive/redrive"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/operator"
)

// exportFile returns the fixture's failures as an export writes them.
func exportFile(t *testing.T, f *fixture) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := f.core.Export(context.Background(), redrive.Filter{}, operator.Reader{Principal: "ada", Payload: true},
		func(l []byte) error { _, err := b.Write(l); return err }); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The import page (admins only) takes an export as a multipart upload: a dry run stores
// nothing, an import stores once, and a refused line is shown by number and field, with
// nothing stored.
func TestImportPage(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	file := exportFile(t, src)
	dst := newJobsFixture(t) // it knows an admin
	if _, err := dst.pool.Exec(context.Background(), "DELETE FROM failures"); err != nil {
		t.Fatal(err)
	}

	op := dst.client()
	op.login(operatorToken)
	if resp, _ := op.do("GET", "/failures/import", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the import page for an operator = %d, want 403", resp.StatusCode)
	}
	tok := op.csrf("/failures")
	if resp, _ := op.postMultipart("/failures/import", [][2]string{{"csrf", tok}}, "file", file); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an operator's import = %d, want 403", resp.StatusCode)
	}

	ada := dst.client()
	ada.login(adminToken)
	_, body := ada.do("GET", "/failures", nil)
	mustContain(t, "failure list", body, `href="/failures/import" id="import"`)
	tok = ada.csrf("/failures/import")
	resp, body := ada.postMultipart("/failures/import", [][2]string{{"csrf", tok}, {"dry_run", "1"}}, "file", file)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `Dry run: read <strong id="import-read">4</strong>`) {
		t.Fatalf("dry run = %d:\n%s", resp.StatusCode, body)
	}
	if n := countFailures(t, dst); n != 0 {
		t.Fatalf("a dry run stored %d failures", n)
	}
	bad := strings.Replace(string(file), `"topic":"orders"`, `"topic":"`+strings.Repeat("t", 10000)+`"`, 1)
	resp, body = ada.postMultipart("/failures/import", [][2]string{{"csrf", tok}}, "file", []byte(bad))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Line 1: topic: 10000 bytes") {
		t.Errorf("a 10,000-character topic = %d:\n%s", resp.StatusCode, body)
	}
	bad = strings.Replace(string(file), `"error_message":"`, `"error_message":"\u0000`, 2)
	if resp, body := ada.postMultipart("/failures/import", [][2]string{{"csrf", tok}}, "file", []byte(bad)); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "Line 1: error_message: contains a NUL character") {
		t.Errorf("a NUL in a text = %d:\n%s", resp.StatusCode, body)
	}
	if n := countFailures(t, dst); n != 0 {
		t.Fatalf("a refused import stored %d failures", n)
	}
	for _, want := range []string{`<strong id="import-inserted">4</strong> stored`, `<strong id="import-inserted">0</strong> stored`} {
		resp, body = ada.postMultipart("/failures/import", [][2]string{{"csrf", tok}}, "file", file)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("import = %d, want %q:\n%s", resp.StatusCode, want, body)
		}
	}
	if n := countFailures(t, dst); n != 4 {
		t.Errorf("%d failures after the import, want 4", n)
	}
}

func countFailures(t *testing.T, f *fixture) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM failures").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The import form as the browser renders it: the file chosen, submitted as multipart with its
// CSRF token, stored.
func TestBrowserImport(t *testing.T) {
	startBrowser(t)
	src := newFixture(t)
	path := filepath.Join(t.TempDir(), "failures.ndjson")
	if err := os.WriteFile(path, exportFile(t, src), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := newJobsFixture(t) // it knows an admin
	if _, err := dst.pool.Exec(context.Background(), "DELETE FROM failures"); err != nil {
		t.Fatal(err)
	}
	ctx := tab(t)
	login(t, ctx, dst.srv.URL, adminToken)
	do(t, ctx, chromedp.Navigate(dst.srv.URL+"/failures"), chromedp.WaitVisible(chromedp.ID("import")))
	clickAndWait(t, ctx, "#import")
	do(t, ctx, chromedp.WaitVisible(chromedp.ID("import-form")), chromedp.SetUploadFiles(chromedp.ID("import-file"), []string{path}))
	clickAndWait(t, ctx, "#import-submit")
	if got := eval[string](t, ctx, `(document.getElementById("import-result") || document.body).innerText`); !strings.Contains(got, "4 stored") {
		t.Fatalf("after the import the page says %q", got)
	}
	if n := countFailures(t, dst); n != 4 {
		t.Errorf("%d failures after the import, want 4", n)
	}
}
