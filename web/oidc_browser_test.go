package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserOIDCSignIn signs in with OpenID Connect in headless Chromium: a page asked for
// while signed out leads to the login page, whose "Sign in with …" goes to the provider and
// back through the callback (a cross-site redirect: the provider is at 127.0.0.1, the UI at
// localhost) to the page asked for, signed in as the provider's user with the role its group
// maps to; signing out leads back to the login page.
func TestBrowserOIDCSignIn(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	ctx := tab(t)

	do(t, ctx, chromedp.Navigate(f.base+"/failures?state=PERMANENT"))
	waitAcrossNavigations(t, ctx, "the login page", `location.pathname === "/login" && !!document.getElementById("oidc-sign-in")`)
	if got := text(t, ctx, "#oidc-sign-in"); got != "Sign in with Testkit ID" {
		t.Fatalf("sign-in link %q", got)
	}
	if !eval[bool](t, ctx, `!!document.getElementById("token")`) {
		t.Fatal("the token form is gone beside OIDC sign-in")
	}
	screenshot(t, ctx, "login-oidc.png")

	clickAndWait(t, ctx, "#oidc-sign-in")
	waitAcrossNavigations(t, ctx, "the failures page after the provider's redirect",
		`location.pathname === "/failures" && document.readyState === "complete" && !!document.getElementById("principal")`)
	if loc := run(t, ctx, chromedp.Location()); !strings.HasPrefix(loc, f.base+"/failures?state=PERMANENT") {
		t.Fatalf("landed on %s, want the page asked for", loc)
	}
	if who := text(t, ctx, "#principal"); who != "alice (user-1)" {
		t.Fatalf("signed in as %q", who)
	}
	if role := text(t, ctx, "#role"); role != "operator" {
		t.Fatalf("role %q", role)
	}
	if !eval[bool](t, ctx, `!!document.getElementById("bulk-close") && !!document.getElementById("select-all")`) {
		t.Fatal("an operator sees no actions")
	}
	if eval[bool](t, ctx, `document.cookie.includes("redrive_oidc")`) {
		t.Fatal("scripts can read the OIDC cookies")
	}

	clickAndWait(t, ctx, "header .user form button")
	waitAcrossNavigations(t, ctx, "the login page after signing out",
		`location.pathname === "/login" && document.readyState === "complete" && !!document.getElementById("oidc-sign-in")`)
	do(t, ctx, chromedp.Navigate(f.base+"/groups"))
	waitAcrossNavigations(t, ctx, "the login page for a page asked for after signing out",
		`location.pathname === "/login" && location.search.includes("groups") && !!document.getElementById("token")`)
}

// TestBrowserOIDCProviderDown: while the provider cannot be reached, "Sign in with …" shows
// that it is unreachable, and the token form on that page still signs in.
func TestBrowserOIDCProviderDown(t *testing.T) {
	t.Parallel()
	f := newOIDCFixture(t, 0)
	f.provider.SetDown(true)
	ctx := tab(t)

	do(t, ctx, chromedp.Navigate(f.base+"/groups"), chromedp.WaitVisible(chromedp.ID("oidc-sign-in")))
	clickAndWait(t, ctx, "#oidc-sign-in")
	waitAcrossNavigations(t, ctx, "the unreachable provider's page",
		`location.pathname === "/auth/login" && !!document.getElementById("login-error") && !!document.getElementById("token")`)
	if msg := text(t, ctx, "#login-error"); !strings.Contains(msg, "identity provider is unreachable") {
		t.Fatalf("message %q", msg)
	}
	do(t, ctx, chromedp.SendKeys(chromedp.ID("token"), operatorToken))
	clickAndWait(t, ctx, "#sign-in")
	waitAcrossNavigations(t, ctx, "the page asked for, signed in with the token",
		`location.pathname === "/groups" && document.readyState === "complete" && !!document.getElementById("principal")`)
	if who := text(t, ctx, "#principal"); who != "olivia" {
		t.Fatalf("signed in as %q", who)
	}
}

// waitAcrossNavigations polls the JavaScript condition cond until it holds, like waitUntil,
// but starts the poll again when a navigation (a redirect of the sign-in) ends it, until
// stepTimeout has passed.
func waitAcrossNavigations(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		left := time.Until(deadline)
		actx, cancel := context.WithTimeout(ctx, left)
		_, err := chromedp.Run(actx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(left)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("browser: waiting for %s (%s): %v", what, cond, err)
		}
		select { // a navigation ended the poll: poll the next page
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
