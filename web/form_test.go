package web

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/redrive/redrive/auth"
)

// postMultipart posts fields (in order) and, when file is not nil, a file in the field upload,
// as a browser sends a form with enctype="multipart/form-data".
func (c *client) postMultipart(path string, fields [][2]string, fileField string, file []byte) (*http.Response, string) {
	c.f.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, kv := range fields {
		if err := mw.WriteField(kv[0], kv[1]); err != nil {
			c.f.t.Fatal(err)
		}
	}
	if file != nil {
		fw, err := mw.CreateFormFile(fileField, "upload.bin")
		if err != nil {
			c.f.t.Fatal(err)
		}
		_, _ = fw.Write(file)
	}
	if err := mw.Close(); err != nil {
		c.f.t.Fatal(err)
	}
	req, err := http.NewRequest("POST", c.f.srv.URL+path, &body)
	if err != nil {
		c.f.t.Fatal(err)
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.c.Do(req)
	if err != nil {
		c.f.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A multipart form passes the CSRF check like a URL-encoded one: with the session's token it
// is served, without it (or with another session's) it is refused, and one over its route's
// bound gets 413.
func TestMultipartFormCSRF(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, fixtureOptions{resend: true, web: func(c *Config) { c.RepairRole = auth.RoleOperator }})
	page := "/failures/" + f.ids[1].String() + "/repair"
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf(page)
	other := f.client()
	other.login(operatorToken)
	otherTok := other.csrf(page)

	for _, tc := range []struct {
		name   string
		fields [][2]string
		want   int
	}{
		{"no token", [][2]string{{"reason", "x"}, {"target_topic", "orders"}}, http.StatusForbidden},
		{"another session's token", [][2]string{{"csrf", otherTok}, {"reason", "x"}, {"target_topic", "orders"}}, http.StatusForbidden},
	} {
		resp, _ := op.postMultipart(page, tc.fields, "upload", []byte("bytes"))
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	resp, body := op.postMultipart(page, [][2]string{{"csrf", tok}, {"reason", "the fixed bytes"}, {"target_topic", "orders"}},
		"upload", []byte("fixed"))
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "?revision=") {
		t.Fatalf("multipart repair with the token = %d %s", resp.StatusCode, body)
	}
	resp, body = op.postMultipart(page, [][2]string{{"csrf", tok}, {"reason", "too big"}}, "upload",
		bytes.Repeat([]byte("x"), maxFormBytes+1))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than") {
		t.Errorf("an oversized form = %d, want 413 saying so", resp.StatusCode)
	}
}
