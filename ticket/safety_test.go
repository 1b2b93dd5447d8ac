package ticket_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redrive/redrive/ticket"
)

// The Jira token never crosses to another origin: a redirect there is refused before any
// request, with an error that says so; a 307 within Jira's origin is followed with the body
// and the credentials; a 302 (which would turn the POST into a GET) is refused.
func TestJiraRedirects(t *testing.T) {
	t.Parallel()
	var stolen atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"key":"EVIL-1"}`))
	}))
	defer other.Close()
	var jira *httptest.Server
	jira = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/cross/"):
			http.Redirect(w, r, other.URL+"/rest/api/2/issue", http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/found/"):
			http.Redirect(w, r, jira.URL+"/same/rest/api/2/issue", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/moved/"):
			http.Redirect(w, r, jira.URL+"/same/rest/api/2/issue", http.StatusPermanentRedirect)
		case strings.HasPrefix(r.URL.Path, "/same/"):
			b, _ := io.ReadAll(r.Body)
			if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer pat-secret" || !json.Valid(b) {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"key":"OPS-9"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer jira.Close()
	create := func(prefix string, client *http.Client) (string, error) {
		j, err := ticket.NewJira(ticket.JiraConfig{URL: jira.URL + prefix, Token: "pat-secret", Project: "OPS", IssueType: "Bug", HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		return j.Create(context.Background(), group())
	}
	for _, client := range []*http.Client{nil, {}} { // the default client, and a caller's that follows anything
		key, err := create("/cross", client)
		if !errors.Is(err, ticket.ErrTracker) || !strings.Contains(err.Error(), "another origin") || strings.Contains(err.Error(), "pat-secret") || key != "" {
			t.Errorf("cross-origin redirect: %q, %v", key, err)
		}
		if key, err := create("/found", client); !errors.Is(err, ticket.ErrTracker) || !strings.Contains(err.Error(), "redirected") || key != "" {
			t.Errorf("302: %q, %v", key, err)
		}
		if key, err := create("/moved", client); err != nil || key != "OPS-9" {
			t.Errorf("same-origin 308: %q, %v", key, err)
		}
	}
	if stolen.Load() != 0 {
		t.Errorf("the other origin got %d requests", stolen.Load())
	}
}

// Failure fields are escaped in the description's wiki markup and kept on one line in the
// summary: a hostile error code neither formats, links, embeds, mentions nor opens a block.
func TestJiraHostileFields(t *testing.T) {
	t.Parallel()
	var got struct {
		Fields struct {
			Summary     string `json:"summary"`
			Description string `json:"description"`
		} `json:"fields"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"key":"OPS-1"}`))
	}))
	defer srv.Close()
	desc, err := ticket.ParseTemplate("description", "Code: {error_code}\nService: {service} ({count})\n{link}")
	if err != nil {
		t.Fatal(err)
	}
	j, err := ticket.NewJira(ticket.JiraConfig{URL: srv.URL, Token: "t", Project: "OPS", IssueType: "Bug", Description: desc,
		BaseURL: "https://redrive.example"})
	if err != nil {
		t.Fatal(err)
	}
	g := group()
	g.ErrorCode = "[click|https://evil.example] !https://evil.example/x.png! *bold* {noformat}\nh1. Heading\r\n{code}[~admin]"
	g.PublisherService = "billing-service|x"
	if _, err := j.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	wantDesc := `Code: \[click\|https://evil.example\] \!https://evil.example/x.png\! \*bold\* \{noformat\} h1. Heading \{code\}\[\~admin\]` +
		"\n" + `Service: billing\-service\|x (17)` + "\nhttps://redrive.example/failures?group_id=42"
	if got.Fields.Description != wantDesc {
		t.Errorf("description\n %q\nwant\n %q", got.Fields.Description, wantDesc)
	}
	if strings.ContainsAny(got.Fields.Summary, "\r\n") || !strings.HasPrefix(got.Fields.Summary, "[click|https://evil.example]") {
		t.Errorf("summary %q", got.Fields.Summary)
	}
	if got := ticket.JiraWikiEscape(`a\b`); got != `a\\b` {
		t.Errorf("backslash: %q", got)
	}
}
