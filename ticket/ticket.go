// Package ticket opens tracker issues from failure groups: a Jira issue through its REST API
// (token or basic auth) with summary and description templates, and a link template that turns
// a group's ticket into an address for any tracker.
//
// Templates take placeholders in braces: {group_id}, {service} (the publisher service that
// failed), {source} (alias of service, as jEAP names it), {message_type}, {error_code},
// {stack_trace_hash}, {count} (failures in the group), {open} (open failures), {first_seen},
// {last_seen}, {link} (the group's failures in redrive's UI). An unknown placeholder is refused
// when the templates are parsed, with its name.
//
// The values come from failures, that is from the publishers, and are not trusted: in a Jira
// description (wiki markup) each value is escaped (JiraWikiEscape) so that it renders as the
// text it is, and in the summary (plain text) line breaks become spaces. The client sends
// Jira's credentials to the configured origin only: it follows a redirect only to the same
// scheme, host and port, keeping the method (307 and 308), and refuses any other.
package ticket

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive"
)

// placeholders lists the names a template may use.
var placeholders = []string{"group_id", "service", "source", "message_type", "error_code", "stack_trace_hash",
	"count", "open", "first_seen", "last_seen", "link", "ticket"}

var placeholderRE = regexp.MustCompile(`\{([^{}]*)\}`)

// Template is a text with {placeholders}.
type Template struct {
	text string
}

// ParseTemplate checks that text names only known placeholders (the error names the first
// unknown one).
func ParseTemplate(name, text string) (Template, error) {
	for _, m := range placeholderRE.FindAllStringSubmatch(text, -1) {
		ok := false
		for _, p := range placeholders {
			ok = ok || p == m[1]
		}
		if !ok {
			return Template{}, fmt.Errorf("%s template: unknown placeholder {%s} (known: {%s})", name, m[1], strings.Join(placeholders, "}, {"))
		}
	}
	return Template{text: text}, nil
}

// Render fills the template with values.
func (t Template) Render(values map[string]string) string {
	return placeholderRE.ReplaceAllStringFunc(t.text, func(m string) string { return values[m[1:len(m)-1]] })
}

// IsZero reports whether the template is empty.
func (t Template) IsZero() bool { return t.text == "" }

// Values returns the placeholder values of a group; baseURL is redrive's UI address (may be
// empty).
func Values(g *redrive.Group, baseURL string) map[string]string {
	v := map[string]string{
		"group_id": strconv.FormatInt(g.ID, 10), "service": g.PublisherService, "source": g.PublisherService,
		"message_type": g.MessageType, "error_code": g.ErrorCode, "stack_trace_hash": g.StackTraceHash,
		"count": strconv.FormatInt(g.TotalCount, 10), "open": strconv.FormatInt(g.OpenCount, 10),
		"first_seen": g.FirstSeen.UTC().Format(time.RFC3339), "last_seen": g.LastSeen.UTC().Format(time.RFC3339),
	}
	if g.Ticket != nil {
		v["ticket"] = *g.Ticket
	}
	if baseURL != "" {
		v["link"] = strings.TrimRight(baseURL, "/") + "/failures?group_id=" + v["group_id"]
	}
	return v
}

// Link turns a ticket into an address with a link template such as
// https://tracker.example/browse/{ticket}; "" without a template.
func Link(t Template, ticket string) string {
	if t.IsZero() || ticket == "" {
		return ""
	}
	return t.Render(map[string]string{"ticket": url.PathEscape(ticket)})
}

// JiraConfig configures a Jira client.
type JiraConfig struct {
	// URL is Jira's base address (https://example.atlassian.net). Required.
	URL string
	// User and Token authenticate with basic auth (Jira Cloud: the account's e-mail and an API
	// token); Token alone is sent as a bearer token (Jira Data Center personal access token).
	User, Token string
	// Project is the project key (OPS); IssueType the issue type's name (Bug). Required.
	Project, IssueType string
	// Summary and Description are the issue's templates. Summary defaults to
	// "{error_code} in {service} ({count} failures)".
	Summary, Description Template
	// BaseURL is redrive's UI address, for {link}.
	BaseURL string
	// HTTPClient reaches Jira. Defaults to a client with a 15 s timeout. Whatever the client,
	// redirects are followed only within Jira's origin (see the package comment).
	HTTPClient *http.Client
}

// Jira creates issues in one Jira project.
type Jira struct {
	cfg JiraConfig
}

// DefaultSummary is the summary template when none is configured.
const DefaultSummary = "{error_code} in {service} ({count} failures)"

// NewJira returns a client for cfg, or an error starting with "invalid config".
func NewJira(cfg JiraConfig) (*Jira, error) {
	var errs []error
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		errs = append(errs, fmt.Errorf("invalid config: Jira URL %q is not an http(s) URL", cfg.URL))
	}
	if cfg.Project == "" || cfg.IssueType == "" {
		errs = append(errs, errors.New("invalid config: the Jira project and issue type are required"))
	}
	if cfg.Token == "" {
		errs = append(errs, errors.New("invalid config: a Jira token is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Summary.IsZero() {
		cfg.Summary, _ = ParseTemplate("summary", DefaultSummary)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	c := *cfg.HTTPClient
	c.CheckRedirect = sameOriginRedirects
	cfg.HTTPClient = &c
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	return &Jira{cfg: cfg}, nil
}

// ErrTracker means the tracker refused or could not be reached; the text says how, without
// credentials.
var ErrTracker = errors.New("issue tracker")

// errRedirect means Jira redirected where its credentials may not follow.
var errRedirect = errors.New("redirect refused")

// maxRedirects bounds the redirects a request to Jira follows.
const maxRedirects = 3

// sameOriginRedirects lets a request to Jira follow a redirect only to the same scheme, host
// and port with the same method (so 307 and 308: a 301, 302 or 303 would turn the POST into a
// GET that creates nothing). Anything else is refused before a request is made, so that the
// Authorization header never leaves the configured origin, not even downgraded to http.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case len(via) > maxRedirects:
		return fmt.Errorf("%w: more than %d redirects", errRedirect, maxRedirects)
	case req.URL.Scheme != first.URL.Scheme || req.URL.Host != first.URL.Host:
		return fmt.Errorf("%w: to %s://%s, another origin than %s://%s (the credentials are not sent there)", errRedirect,
			req.URL.Scheme, req.URL.Host, first.URL.Scheme, first.URL.Host)
	case req.Method != first.Method:
		return fmt.Errorf("%w: it would turn the %s into a %s", errRedirect, first.Method, req.Method)
	}
	return nil
}

// plainLine makes a value one line of plain text.
var plainLine = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ")

// JiraWikiEscape returns s as Jira wiki markup that renders as s: every character that wiki
// markup interprets (\ * _ ? - + ^ ~ { } [ ] | ! #) is escaped with a backslash,
// and line breaks become spaces, so that a value can neither format, link, embed, mention nor
// start a block (a heading, a quote, a panel, a code or noformat block).
func JiraWikiEscape(s string) string {
	s = plainLine.Replace(s)
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if strings.ContainsRune(jiraMarkup, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// untrusted are the placeholders whose values come from the failures (the publishers); the
// others are redrive's own: numbers, times, and the link built from the configured address.
var untrusted = []string{"service", "source", "message_type", "error_code", "stack_trace_hash", "ticket"}

// jiraMarkup lists the characters Jira's wiki renderer gives a meaning.
const jiraMarkup = `\*_?-+^~{}[]|!#`

// Create opens an issue for g and returns its key (OPS-123).
func (j *Jira) Create(ctx context.Context, g *redrive.Group) (string, error) {
	v := Values(g, j.cfg.BaseURL)
	plain, wiki := map[string]string{}, map[string]string{}
	for k, s := range v {
		plain[k], wiki[k] = plainLine.Replace(s), s
	}
	for _, k := range untrusted {
		if s, ok := v[k]; ok {
			wiki[k] = JiraWikiEscape(s)
		}
	}
	summary := j.cfg.Summary.Render(plain)
	if len(summary) > 250 { // Jira refuses longer summaries
		summary = summary[:250]
	}
	body, err := json.Marshal(map[string]any{"fields": map[string]any{
		"project":     map[string]string{"key": j.cfg.Project},
		"issuetype":   map[string]string{"name": j.cfg.IssueType},
		"summary":     summary,
		"description": j.cfg.Description.Render(wiki),
	}})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.cfg.URL+"/rest/api/2/issue", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if j.cfg.User != "" {
		req.SetBasicAuth(j.cfg.User, j.cfg.Token)
	} else {
		req.Header.Set("Authorization", "Bearer "+j.cfg.Token)
	}
	resp, err := j.cfg.HTTPClient.Do(req)
	if errors.Is(err, errRedirect) {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the wrapper quotes the URL
		}
		return "", fmt.Errorf("%w: Jira at %s redirected, not followed: %v; set the Jira URL to the final address", ErrTracker, req.URL.Host, err)
	}
	if err != nil {
		return "", fmt.Errorf("%w: Jira at %s could not be reached", ErrTracker, req.URL.Host)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		var e struct {
			ErrorMessages []string          `json:"errorMessages"`
			Errors        map[string]string `json:"errors"`
		}
		_ = json.Unmarshal(b, &e)
		detail := strings.Join(e.ErrorMessages, "; ")
		for k, v := range e.Errors {
			detail += fmt.Sprintf("; %s: %s", k, v)
		}
		return "", fmt.Errorf("%w: Jira answered %s%s", ErrTracker, resp.Status, strings.TrimRight(" "+strings.TrimPrefix(detail, "; "), " "))
	}
	var created struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(b, &created); err != nil || created.Key == "" {
		return "", fmt.Errorf("%w: Jira's answer names no issue key", ErrTracker)
	}
	return created.Key, nil
}
