package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// cookieValue returns the value of the browser's cookie name for the UI, or "".
func cookieValue(t *testing.T, ctx context.Context, base, name string) string {
	t.Helper()
	res := run(t, ctx, func(ctx context.Context, tg *chromedp.Target) (*network.GetCookiesResult, error) {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
		return &r, err
	})
	for _, c := range res.Cookies {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// setCookieValue puts a cookie for the UI into the browser, as a copy replayed from
// elsewhere.
func setCookieValue(t *testing.T, ctx context.Context, base, name, value string) {
	t.Helper()
	yes := true
	do(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: name, Value: value, URL: base + "/", Path: "/",
			HTTPOnly: &yes, SameSite: network.CookieSameSiteLax})
		return chromedp.Void{}, err
	})
}

// providerSignIn fills in the provider's sign-in form.
func providerSignIn(t *testing.T, ctx context.Context, user string) {
	t.Helper()
	waitAcrossNavigations(t, ctx, "the provider's sign-in form", `!!document.getElementById("username")`)
	do(t, ctx, chromedp.SendKeys(chromedp.ID("username"), user), chromedp.SendKeys(chromedp.ID("password"), user+"-password"))
	clickAndWait(t, ctx, "#submit")
}

// TestBrowserOIDCSignIn signs in with OpenID Connect in headless Chromium against the
// certified provider: a page asked for while signed out leads to the login page, whose "Sign
// in with …" goes to the provider's form and back through the callback (a cross-site
// redirect: the provider is at 127.0.0.1, the UI at localhost) to the page asked for, signed
// in with the role the user's group maps to. Signing out goes through the provider's
// end-session endpoint (with id_token_hint) back to the login page; the session cookie copied
// before, put back into the browser, is refused. After a key rotation at the provider the next
// sign-in works (the new key is fetched); an admin's revocation signs the browser out at once.
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
	providerSignIn(t, ctx, "alice")
	waitAcrossNavigations(t, ctx, "the failures page after the provider's redirect",
		`location.pathname === "/failures" && document.readyState === "complete" && !!document.getElementById("principal")`)
	if loc := run(t, ctx, chromedp.Location()); !strings.HasPrefix(loc, f.base+"/failures?state=PERMANENT") {
		t.Fatalf("landed on %s, want the page asked for", loc)
	}
	if who := text(t, ctx, "#principal"); who != "alice" {
		t.Fatalf("signed in as %q", who)
	}
	if role := text(t, ctx, "#role"); role != "operator" {
		t.Fatalf("role %q", role)
	}
	if !eval[bool](t, ctx, `!!document.getElementById("bulk-close") && !!document.getElementById("select-all")`) {
		t.Fatal("an operator sees no actions")
	}
	if eval[bool](t, ctx, `document.cookie.includes("redrive_auth")`) {
		t.Fatal("scripts can read the session cookie")
	}
	copied := cookieValue(t, ctx, f.base, authCookie)
	if len(copied) != 43 {
		t.Fatalf("session cookie %q", copied)
	}

	clickAndWait(t, ctx, "header .user form button")
	waitAcrossNavigations(t, ctx, "the login page after signing out at the provider",
		`location.pathname === "/login" && document.readyState === "complete" && !!document.getElementById("oidc-sign-in")`)
	if ends := f.provider.EndSessions(); len(ends) != 1 || ends[0].Get("id_token_hint") == "" {
		t.Fatalf("the provider's end-session calls: %v", ends)
	}
	setCookieValue(t, ctx, f.base, authCookie, copied)
	do(t, ctx, chromedp.Navigate(f.base+"/groups"))
	waitAcrossNavigations(t, ctx, "the login page for the replayed cookie",
		`location.pathname === "/login" && location.search.includes("groups") && !!document.getElementById("token")`)

	// The provider rotates its key: the ID token of the next sign-in names a new kid.
	f.provider.RotateKey()
	f.skew.Store(int64(31 * time.Second)) // past the refetch interval of the keys
	do(t, ctx, chromedp.Navigate(f.base+"/login?next=%2Fgroups"), chromedp.WaitVisible(chromedp.ID("oidc-sign-in")))
	clickAndWait(t, ctx, "#oidc-sign-in")
	providerSignIn(t, ctx, "alice")
	waitAcrossNavigations(t, ctx, "the groups page after signing in with the rotated key",
		`location.pathname === "/groups" && document.readyState === "complete" && !!document.getElementById("principal")`)

	// An admin (the break-glass token, in a browser of their own) revokes the session on the
	// sessions page: the next page of the user asks to sign in.
	admin := tab(t)
	login(t, admin, f.base, adminToken)
	do(t, admin, chromedp.Navigate(f.base+"/sessions"), chromedp.WaitVisible(chromedp.ID("sessions")))
	screenshot(t, admin, "sessions.png")
	list, err := f.sessions.List(context.Background(), 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("sessions %+v, %v", list, err)
	}
	var victim string
	for _, s := range list {
		if s.Principal.Display == "alice" {
			victim = s.ID
		}
	}
	clickAndWait(t, admin, "#revoke-"+victim)
	waitUntil(t, admin, "the revocation's notice", `!!document.getElementById("revoked")`)
	do(t, ctx, chromedp.Navigate(f.base+"/failures"))
	waitAcrossNavigations(t, ctx, "the login page after the revocation",
		`location.pathname === "/login" && !!document.getElementById("token")`)
}

// TestBrowserOIDCProviderDown: while the provider cannot be reached, "Sign in with …" shows
// that it is unreachable (503), and the token form on that page still signs in.
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
