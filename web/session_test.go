package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

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
		if ck.Name == authCookie && (!ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || strings.Contains(ck.Value, operatorToken)) {
			t.Fatalf("session cookie = %+v", ck)
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
	if resp.StatusCode != 200 || !strings.Contains(body, `id="principal">pat<`) || strings.Contains(body, "Sign out") {
		t.Fatalf("proxy user: %d", resp.StatusCode)
	}
	if strings.Contains(body, `id="bulk-retry"`) {
		t.Fatal("a viewer sees the bulk actions")
	}
}

// A trusted proxy that vouches for a user it cannot name gets a 401 page, whatever else the
// request carries: no session has an empty principal.
func TestProxyIdentityRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login(operatorToken)
	u, _ := url.Parse(f.srv.URL)
	var cookie string
	for _, ck := range c.c.Jar.Cookies(u) {
		if ck.Name == authCookie {
			cookie = ck.String()
		}
	}
	if cookie == "" {
		t.Fatal("no session cookie after the token sign-in")
	}
	for name, users := range map[string][]string{
		"not UTF-8":          {"\xff"},
		"control characters": {"\x01\x02\x7f"},
		"only formatting":    {"\u202e\u200b"},
		"blank":              {"   "},
		"twice":              {"pat", "sam"},
	} {
		for _, path := range []string{"/", "/failures", "/login", "/groups"} {
			for _, withToken := range []bool{false, true} {
				r := httptest.NewRequest("GET", path, nil)
				r.RemoteAddr = "127.0.0.1:40000"
				for _, u := range users {
					r.Header.Add("X-Forwarded-User", u)
				}
				if withToken {
					r.Header.Set("Cookie", cookie)
				}
				w := httptest.NewRecorder()
				f.handler.ServeHTTP(w, r)
				body := w.Body.String()
				if w.Code != http.StatusUnauthorized {
					t.Errorf("%s, %s (token cookie %v): %d, want 401", name, path, withToken, w.Code)
				}
				if !strings.Contains(body, "no usable user name") || strings.Contains(body, `id="principal"`) || strings.Contains(body, "olivia") ||
					strings.Contains(body, `href="/login"`) {
					t.Errorf("%s, %s (token cookie %v): the page names a principal or lacks the reason:\n%s", name, path, withToken, body)
				}
			}
		}
	}
	// The same request with a proper name is served.
	r := httptest.NewRequest("GET", "/failures", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("X-Forwarded-User", "pat")
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="principal">pat<`) {
		t.Fatalf("a named proxy user: %d", w.Code)
	}
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/failures?x=1": "/failures?x=1", "": "/", "//evil.example": "/", "/\\evil.example": "/",
		"https://evil.example/": "/", "failures": "/", "/a\r\nSet-Cookie: x": "/", "javascript:alert(1)": "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
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
