package ticket_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/ticket"
)

func group() *redrive.Group {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return &redrive.Group{ID: 42, PublisherService: "billing", MessageType: "Invoice", ErrorCode: "TIMEOUT",
		StackTraceHash: "abc", FirstSeen: at, LastSeen: at.Add(time.Hour), TotalCount: 17, OpenCount: 5}
}

// The Jira client sends what Jira's REST API expects, with the templates filled in.
func TestJiraCreate(t *testing.T) {
	t.Parallel()
	var got struct {
		Fields struct {
			Project     struct{ Key string }  `json:"project"`
			IssueType   struct{ Name string } `json:"issuetype"`
			Summary     string                `json:"summary"`
			Description string                `json:"description"`
		} `json:"fields"`
	}
	var auth, path, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, path, ctype = r.Header.Get("Authorization"), r.URL.Path, r.Header.Get("Content-Type")
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"10001","key":"OPS-7","self":"x"}`))
	}))
	defer srv.Close()
	desc, err := ticket.ParseTemplate("description", "Group {group_id}: {count} failures of {message_type} ({open} open) since {first_seen}.\n{link}")
	if err != nil {
		t.Fatal(err)
	}
	j, err := ticket.NewJira(ticket.JiraConfig{URL: srv.URL + "/", User: "ops@example.com", Token: "api-token", Project: "OPS",
		IssueType: "Bug", Description: desc, BaseURL: "https://redrive.example"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := j.Create(context.Background(), group())
	if err != nil || key != "OPS-7" {
		t.Fatalf("Create = %q, %v", key, err)
	}
	if path != "/rest/api/2/issue" || ctype != "application/json" || !strings.HasPrefix(auth, "Basic ") {
		t.Errorf("request %s %s %s", path, ctype, auth)
	}
	if got.Fields.Project.Key != "OPS" || got.Fields.IssueType.Name != "Bug" || got.Fields.Summary != "TIMEOUT in billing (17 failures)" ||
		got.Fields.Description != "Group 42: 17 failures of Invoice (5 open) since 2026-12-01T10:00:00Z.\nhttps://redrive.example/failures?group_id=42" {
		t.Errorf("fields = %+v", got.Fields)
	}
}

// Jira's refusals and outages are errors that say so, without the token.
func TestJiraErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer pat-secret" {
			http.Error(w, "", 401)
			return
		}
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"errorMessages":[],"errors":{"project":"project is required"}}`))
	}))
	defer srv.Close()
	j, err := ticket.NewJira(ticket.JiraConfig{URL: srv.URL, Token: "pat-secret", Project: "NOPE", IssueType: "Bug"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Create(context.Background(), group())
	if !errors.Is(err, ticket.ErrTracker) || !strings.Contains(err.Error(), "project is required") || strings.Contains(err.Error(), "pat-secret") {
		t.Errorf("refusal = %v", err)
	}
	srv.Close()
	if _, err := j.Create(context.Background(), group()); !errors.Is(err, ticket.ErrTracker) || !strings.Contains(err.Error(), "could not be reached") {
		t.Errorf("outage = %v", err)
	}
	for name, cfg := range map[string]ticket.JiraConfig{
		"no url":     {Token: "t", Project: "P", IssueType: "Bug"},
		"no project": {URL: "https://x", Token: "t", IssueType: "Bug"},
		"no token":   {URL: "https://x", Project: "P", IssueType: "Bug"},
	} {
		if _, err := ticket.NewJira(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	if _, err := ticket.ParseTemplate("summary", "{error_code} in {nope}"); err == nil || !strings.Contains(err.Error(), "{nope}") {
		t.Errorf("unknown placeholder: %v", err)
	}
	link, err := ticket.ParseTemplate("link", "https://tracker.example/browse/{ticket}")
	if err != nil {
		t.Fatal(err)
	}
	if got := ticket.Link(link, "OPS-1/../x"); got != "https://tracker.example/browse/OPS-1%2F..%2Fx" {
		t.Errorf("link = %q", got)
	}
	if ticket.Link(ticket.Template{}, "OPS-1") != "" {
		t.Error("a link without a template")
	}
}
