package web

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var writeScreenshots = flag.Bool("screenshots", false, "write the browser tests' screenshots to docs/screenshots")

// The one browser of the test binary, started by the first test that needs it.
var browser struct {
	once    sync.Once
	ctx     context.Context
	err     error
	stop    func()
	dataDir string
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if browser.stop != nil {
		browser.stop()
		_ = os.RemoveAll(browser.dataDir)
	}
	os.Exit(code)
}

// chromiumPath finds the browser: /usr/bin/chromium (the Debian package) or one on the PATH.
func chromiumPath() (string, error) {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium found: install it (apt-get install -y chromium; .ci/run does)")
}

// startBrowser starts headless Chromium once for the whole test binary.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	browser.once.Do(func() {
		path, err := chromiumPath()
		if err != nil {
			browser.err = err
			return
		}
		if browser.dataDir, err = os.MkdirTemp("", "redrive-web-chromium-"); err != nil {
			browser.err = err
			return
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path),
			chromedp.Flag("headless", true),
			chromedp.NoSandbox, // the tests run as root in CI
			chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true),
			chromedp.NoFirstRun,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			// A loaded machine must not make the browser throttle the tests' tabs.
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.Flag("disable-backgrounding-occluded-windows", true),
			chromedp.UserDataDir(browser.dataDir),
		)
		ctx, cancelBrowser := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx); err != nil { // starts the browser
			cancelBrowser()
			cancelAlloc()
			browser.err = fmt.Errorf("start %s: %w", path, err)
			return
		}
		browser.ctx = ctx
		browser.stop = func() { cancelBrowser(); cancelAlloc() }
	})
	if browser.err != nil {
		t.Fatalf("browser: %v", browser.err)
	}
	return browser.ctx
}

// stepTimeout bounds each browser step (a navigation, a click and the page it loads, a wait
// for a condition). It is generous: the tests wait for conditions, never for a time, and a
// busy machine with two cores may take long to render a page; the bound only matters when the
// condition never holds.
const stepTimeout = 2 * time.Minute

// tab opens a tab in a browser context of its own (its own cookies), 1280 px wide, closed
// when the test ends.
func tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(startBrowser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run on a new context opens the tab and ties it to the context it is given:
	// open it on ctx itself, not on a step's context, whose end would close it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browser: open a tab: %v", err)
	}
	do(t, ctx, chromedp.EmulateViewport(1280, 900))
	return ctx
}

// do runs browser actions within stepTimeout, failing the test on error.
func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// run runs one browser action that returns a value within stepTimeout, failing the test on
// error.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// waitUntil polls the JavaScript condition cond in the page until it holds, failing the test
// with what after stepTimeout: for state that the page's script or a navigation changes.
func waitUntil(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(stepTimeout))); err != nil {
		t.Fatalf("browser: waiting for %s (%s): %v", what, cond, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return run(t, ctx, chromedp.Evaluate[T](expr))
}

// text returns the visible text of the first element that matches the CSS selector.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	return run(t, ctx, chromedp.Text(chromedp.CSS(css), chromedp.NodeVisible))
}

// clickAndWait clicks the element and waits for the page that the click loads.
func clickAndWait(t *testing.T, ctx context.Context, css string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible)); err != nil {
		t.Fatalf("browser: click %s: %v", css, err)
	}
}

// login signs in through the login page.
func login(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	do(t, ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
	)
	clickAndWait(t, ctx, "#sign-in")
	if loc := run(t, ctx, chromedp.Location()); strings.Contains(loc, "/login") {
		t.Fatalf("still on the login page after signing in: %s", loc)
	}
}

// screenshot saves the full page as PNG: to docs/screenshots with -screenshots, else to a
// temporary directory (the capture itself is still exercised).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := run(t, ctx, chromedp.FullScreenshot(100))
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s is not a PNG", name)
	}
	dir := t.TempDir()
	if *writeScreenshots {
		dir = filepath.Join("..", "docs", "screenshots")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
