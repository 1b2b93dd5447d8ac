package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/operator"
)

// maxUpload bounds an uploaded value: what a posted form may carry.
const maxUpload = maxFormBytes - 64<<10

// repairRole is the role that may repair.
func (h *handler) repairRole() auth.Role {
	if h.cfg.RepairRole == auth.RoleNone {
		return auth.RoleAdmin
	}
	return h.cfg.RepairRole
}

// repairPage is the data of a failure's repair page.
type repairPage struct {
	F *operator.FailureView
	// CanRepair says the user may repair (the role, the payload permission, an open failure).
	CanRepair bool
	// Value is the value to start editing from, in Format (text, json, avro, protobuf or
	// jsonschema); Editable is
	// false when the value is none of these (bytes: upload a file). ValueWithheld, when not
	// empty, says why the form does not start from the value (hidden or masked for the user):
	// it then keeps the original unless the user gives a whole new value.
	Value         string
	Format        string
	Editable      bool
	ValueWithheld string
	// Headers are the headers to start editing from, one per line, when HeadersEditable;
	// HeadersWithheld says why the form does not show them (the repair keeps them).
	Headers         string
	HeadersEditable bool
	HeadersWithheld string
	Topics          []string
	Reason          string
	Error           string
	// Revisions are the failure's repairs, each with its diff against the original value.
	Revisions []revisionView
	// Shown is the revision just made, when the page follows a repair.
	Shown int64
}

// revisionView is one revision with its line diff against the original value.
type revisionView struct {
	redrive.Revision
	Diff     []diffLine
	DiffNote string
}

func (h *handler) getRepair(w http.ResponseWriter, r *http.Request) {
	f, ok := h.repairFailure(w, r)
	if !ok {
		return
	}
	p := h.newRepairPage(r, f)
	p.Shown, _ = strconv.ParseInt(r.URL.Query().Get("revision"), 10, 64)
	h.render(w, r, http.StatusOK, "repair", "Repair "+f.ID.String(), p)
}

// repairFailure loads the failure of the request's path, or answers 404.
func (h *handler) repairFailure(w http.ResponseWriter, r *http.Request) (*operator.FailureView, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		h.renderError(w, r, http.StatusNotFound, "There is no failure with this id.")
		return nil, false
	}
	f, err := h.core.Failure(r.Context(), id, reader(r))
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no failure with this id.")
		return nil, false
	case err != nil:
		h.serverError(w, r, "get failure", err)
		return nil, false
	}
	return f, true
}

func (h *handler) newRepairPage(r *http.Request, f *operator.FailureView) repairPage {
	s := sessionFrom(r.Context())
	p := repairPage{F: f, Topics: append([]string{f.Topic}, h.core.RepairTopics()...),
		CanRepair: s.principal.Role.Allows(h.repairRole()) && f.PayloadHidden == "" && f.State.Resendable() && h.core.CanRetry()}
	// The form starts from the original only where the user sees it as stored: never from a
	// masked view, whose asterisks would be sent in place of the original.
	start, err := h.core.RepairStart(r.Context(), f)
	if err != nil {
		h.cfg.Logger.Error("web: repair form", "failure", f.ID, "error", err)
		start = &operator.RepairStart{ValueWithheld: "the value could not be read", HeadersWithheld: "the headers could not be read"}
	}
	p.ValueWithheld, p.HeadersWithheld = sentence(start.ValueWithheld), sentence(start.HeadersWithheld)
	p.Value, p.Format, p.Editable = string(start.Value), start.Format, start.Format != ""
	if start.HeadersWithheld == "" {
		p.HeadersEditable = true
		var hs strings.Builder
		for _, hd := range start.Headers {
			switch {
			case hd.Name == "" || strings.ContainsAny(hd.Name, ":\r\n") || strings.TrimSpace(hd.Name) != hd.Name:
				p.HeadersEditable = false // a name that one line "name: value" cannot give back
			case hd.Value == nil:
				hs.WriteString(hd.Name + "\n")
			case utf8.Valid(hd.Value) && !strings.ContainsAny(string(hd.Value), "\r\n"):
				hs.WriteString(hd.Name + ": " + string(hd.Value) + "\n")
			default:
				p.HeadersEditable = false // a header that is not one line of text: keep the headers
			}
		}
		if p.HeadersEditable {
			p.Headers = hs.String()
		}
	}
	revs, err := h.core.Revisions(r.Context(), f.ID, reader(r))
	if err == nil {
		for _, rev := range revs {
			rv := revisionView{Revision: rev}
			rv.Diff, rv.DiffNote = lineDiff(f.Value, rev.Value)
			p.Revisions = append(p.Revisions, rv)
		}
	}
	return p
}

func (h *handler) postRepair(w http.ResponseWriter, r *http.Request) {
	f, ok := h.repairFailure(w, r)
	if !ok {
		return
	}
	req := operator.RepairRequest{ID: f.ID, Principal: sessionFrom(r.Context()).principal.Name,
		Reason: r.PostFormValue("reason"), TargetTopic: r.PostFormValue("target_topic"), Payload: reader(r).Payload}
	problem := ""
	if file, _, err := r.FormFile("upload"); err == nil {
		b, err := io.ReadAll(io.LimitReader(file, maxUpload+1))
		file.Close()
		switch {
		case err != nil:
			problem = "The file could not be read."
		case len(b) > maxUpload:
			problem = fmt.Sprintf("The file is larger than %s (the API takes up to %s).", byteSize(maxUpload), byteSize(operator.MaxRepairBytes))
		default:
			req.Value, req.ValueFormat = b, operator.EditBytes
		}
	} else if r.PostFormValue("value_format") != "" {
		req.Value = []byte(strings.ReplaceAll(r.PostFormValue("value"), "\r\n", "\n"))
		req.ValueFormat = r.PostFormValue("value_format")
	} else if r.PostFormValue("value") != "" {
		problem = "Choose the format of the value you typed, or clear it to keep the original value."
	}
	if hs := r.PostFormValue("headers"); r.PostForm.Has("headers") && problem == "" {
		req.Headers = []avro.Header{}
		for i, line := range strings.Split(strings.ReplaceAll(hs, "\r\n", "\n"), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			name, value, has := strings.Cut(line, ":")
			name = strings.TrimSpace(name)
			if name == "" {
				problem = fmt.Sprintf("Header line %d names no header.", i+1)
				break
			}
			hd := avro.Header{Name: name}
			if has {
				hd.Value = []byte(strings.TrimPrefix(value, " "))
			}
			req.Headers = append(req.Headers, hd)
		}
	}
	if problem == "" {
		res, err := h.core.Repair(r.Context(), req)
		var ie *operator.InputError
		switch {
		case errors.As(err, &ie):
			problem = sentence(ie.Error())
		case errors.Is(err, redrive.ErrConflict), errors.Is(err, redrive.ErrUnavailable):
			problem = sentence(err.Error())
		case err != nil && res == nil:
			h.serverError(w, r, "repair", err)
			return
		default:
			http.Redirect(w, r, "/failures/"+f.ID.String()+"/repair?revision="+strconv.FormatInt(res.Revision.ID, 10), http.StatusSeeOther)
			return
		}
	}
	p := h.newRepairPage(r, f)
	p.Error, p.Reason = problem, r.PostFormValue("reason")
	if r.PostForm.Has("value") {
		p.Value, p.Format = r.PostFormValue("value"), r.PostFormValue("value_format")
	}
	if r.PostForm.Has("headers") {
		p.Headers = r.PostFormValue("headers")
	}
	h.render(w, r, http.StatusBadRequest, "repair", "Repair "+f.ID.String(), p)
}

// diffLine is one line of a diff: kept (" "), removed ("-") or added ("+").
type diffLine struct {
	Op   string
	Text []textSeg
}

// maxDiffLines bounds the lines of each side a diff compares.
const maxDiffLines = 2000

// lineDiff returns the line diff of two values (as text), or a note saying why there is none.
func lineDiff(a, b []byte) ([]diffLine, string) {
	switch {
	case b == nil:
		return nil, "The revision's value is null (a tombstone)."
	case !utf8.Valid(a) || !utf8.Valid(b):
		return nil, fmt.Sprintf("Binary values: %s before, %s after.", byteSize(len(a)), byteSize(len(b)))
	}
	x, y := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		return nil, fmt.Sprintf("Too long to compare line by line (%d and %d lines).", len(x), len(y))
	}
	// Longest common subsequence, then a walk that emits the edits.
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out = append(out, diffLine{Op: " ", Text: textView([]byte(x[i]))})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, diffLine{Op: "-", Text: textView([]byte(x[i]))})
			i++
		default:
			out = append(out, diffLine{Op: "+", Text: textView([]byte(y[j]))})
			j++
		}
	}
	return out, ""
}
