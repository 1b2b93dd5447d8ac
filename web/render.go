package web

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// pageNames are the templates under templates/ that render a whole page; every other file
// there holds shared definitions.
var pageNames = []string{"overview", "failures", "failure", "confirm", "result", "groups", "login", "error",
	// Triage at scale: the group page.
	"group",
	// Repair and resend.
	"repair",
	// The way out of an OIDC session through the provider's end-session endpoint.
	"signedout",
	// The signed-in sessions, for administrators.
	"sessions",
}

// The pages of jobs and of the reactivation of the own dead-letter topic.
func init() {
	pageNames = append(pageNames, "jobs", "job", "jobpreview", "deadletters", "reactivation")
}

// pages holds one parsed template set per page.
type pages struct {
	byName map[string]*template.Template
}

func parsePages() (*pages, error) {
	base := template.New("layout").Funcs(funcs)
	all, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	isPage := map[string]bool{}
	for _, n := range pageNames {
		isPage["templates/"+n+".html"] = true
	}
	var shared []string
	for _, f := range all {
		if !isPage[f] {
			shared = append(shared, f)
		}
	}
	if base, err = base.ParseFS(templateFS, shared...); err != nil {
		return nil, err
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range pageNames {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if t, err = t.ParseFS(templateFS, "templates/"+n+".html"); err != nil {
			return nil, err
		}
		p.byName[n] = t
	}
	return p, nil
}

// view is what every page template receives.
type view struct {
	Title   string
	Section string
	// User is the signed-in principal; Signed is false on the login and some error pages.
	User   auth.Principal
	Signed bool
	// Ambient is true when the principal came with the request (a trusted proxy's user):
	// there is no sign-out.
	Ambient bool
	// CSRF is the session's token for the forms' hidden field.
	CSRF string
	// CanAct is true when the user may retry, close and edit groups; CanRetry when this
	// server also resends.
	CanAct   bool
	CanRetry bool
	Now      time.Time
	Data     any
}

// render executes page with data into a buffer first, so that a template error becomes a
// clean 500 rather than half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, page, title string, data any) {
	s := sessionFrom(r.Context())
	v := view{
		Title:    title,
		Section:  page,
		User:     s.principal,
		Signed:   s.authed,
		Ambient:  s.ambient,
		CSRF:     s.csrf,
		CanAct:   s.authed && s.principal.Role.Allows(auth.RoleOperator),
		CanRetry: h.core.CanRetry(),
		Now:      h.cfg.Now(),
		Data:     data,
	}
	t := h.pages.byName[page]
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		h.cfg.Logger.Error("web: render", "page", page, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the data of the error page.
type errorPage struct {
	Message string
	// NoSignIn hides the sign-in link, for a request that signing in cannot help.
	NoSignIn bool
}

// renderError shows msg, which must be safe for the user to read.
func (h *handler) renderError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", http.StatusText(status), errorPage{Message: msg})
}

// renderRefusedIdentity answers a request whose ambient identity (a trusted proxy's user
// header) is unusable: 401, and no way in but fixing the proxy.
func (h *handler) renderRefusedIdentity(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusUnauthorized, "error", http.StatusText(http.StatusUnauthorized), errorPage{NoSignIn: true,
		Message: "The authenticating proxy in front of redrive sent no usable user name, so this request cannot be attributed to anyone. Ask its administrator to check the proxy's user header."})
}

// serverError logs err and shows a generic message: internal error text never reaches the page.
func (h *handler) serverError(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.cfg.Logger.Error("web: "+what, "error", err, "path", r.URL.Path)
	h.renderError(w, r, http.StatusInternalServerError, "Something went wrong on the server; the error has been logged.")
}

const timeLayout = "2006-01-02 15:04:05Z"

var funcs = template.FuncMap{
	"ts": func(v any) string {
		if t, ok := asTime(v); ok {
			return t.UTC().Format(timeLayout)
		}
		return ""
	},
	"iso": func(v any) string {
		if t, ok := asTime(v); ok {
			return t.UTC().Format(time.RFC3339Nano)
		}
		return ""
	},
	"ago": func(now time.Time, v any) string {
		if t, ok := asTime(v); ok {
			return humanDuration(now.Sub(t))
		}
		return ""
	},
	"isTime":    func(v any) bool { _, ok := asTime(v); return ok },
	"ticketURL": ticketURL,
	"visible":   visible,
	"stateClass": func(s redrive.State) string {
		return "state state-" + strings.ToLower(strings.ReplaceAll(string(s), "_", "-"))
	},
	"bytes":        byteSize,
	"add":          func(a, b int) int { return a + b },
	"maxReasonLen": func() int { return operator.MaxReasonLen },
	"maxTicketLen": func() int { return redrive.MaxTicketLen },
	"maxNoteLen":   func() int { return redrive.MaxNoteLen },
	// Triage at scale: counts with thousands separators, positions that may be unknown,
	// clipped stored text (clip before visible).
	"thousands": thousands,
	"position":  position,
	"clip":      func(s string, n int) string { return clip.Text(s, n) },
	"dict":      dict,
	"change":    auditChange,
	"pct": func(part, whole int64) string {
		if whole == 0 {
			return "0"
		}
		return strconv.FormatInt(part*100/whole, 10)
	},
}

// asTime returns the time in a time.Time or a non-nil *time.Time, and false for a zero time.
func asTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t != nil {
			return *t, !t.IsZero()
		}
	}
	return time.Time{}, false
}

// ticketURL returns a group's ticket when it is an http or https address without invisible
// or reordering characters, to be shown as a link; "" otherwise.
func ticketURL(ticket *string) string {
	if ticket == nil || visible(*ticket) != *ticket {
		return ""
	}
	u, err := url.Parse(*ticket)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return u.String()
}

// humanDuration renders d in its largest sensible units: "45s", "12m", "3h 20m", "1h", "4d 2h".
func humanDuration(d time.Duration) string {
	if d < 0 {
		return "in " + humanDuration(-d)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh %dm", int(d.Hours()), m)
		}
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		if h := int(d.Hours()) % 24; h != 0 {
			return fmt.Sprintf("%dd %dh", int(d.Hours())/24, h)
		}
		return fmt.Sprintf("%dd", int(d.Hours())/24)
	}
}

// byteSize renders n bytes as "812 B", "4.0 KiB", "1.5 MiB".
func byteSize(n int) string {
	switch {
	case n < 1024:
		return strconv.Itoa(n) + " B"
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
