package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/operator"
)

// Problem is an RFC 9457 problem document, the body of every error response
// (application/problem+json).
type Problem struct {
	// Type is "about:blank": the status says what kind of problem it is.
	Type string `json:"type"`
	// Title is the status text.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence, naming the bad field when there is one.
	Detail string `json:"detail,omitempty"`
	// Field is the request field (query parameter, path parameter or JSON member) at fault.
	Field string `json:"field,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
}

// statusClientClosed is the (non-standard) status logged for a request whose client went away.
const statusClientClosed = 499

// requestError is a client error with the status to answer and the field at fault.
type requestError struct {
	status int
	field  string
	detail string
}

func (e *requestError) Error() string {
	if e.field != "" {
		return e.field + ": " + e.detail
	}
	return e.detail
}

// badRequest returns a 400 error naming field.
func badRequest(field, format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, field: field, detail: fmt.Sprintf(format, args...)}
}

// unprocessable returns a 422 error naming field.
func unprocessable(field, format string, args ...any) error {
	return &requestError{status: http.StatusUnprocessableEntity, field: field, detail: fmt.Sprintf(format, args...)}
}

// writeProblem writes a problem document. The detail (and field, when given) name what is wrong.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, field, detail string) {
	p := Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Field: field, Detail: detail}
	if status == statusClientClosed {
		p.Title = "Client Closed Request"
	}
	if field != "" && detail != "" {
		p.Detail = field + ": " + detail
	}
	if r != nil {
		p.Instance = r.URL.Path
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// fail answers err as a problem: client errors with their status and detail (the core's
// *operator.InputError as 400, or 422 when unprocessable), unknown ids as 404, an unavailable
// action as 503, timeouts as 503, and anything else as a 500 whose detail does not leak
// internal text (the error is logged).
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		re *requestError
		ie *operator.InputError
	)
	switch {
	case errors.As(err, &re):
		writeProblem(w, r, re.status, re.field, re.detail)
	case errors.As(err, &ie):
		writeProblem(w, r, ie.Status(), ie.Field, ie.Detail)
	case errors.Is(err, redrive.ErrTracker):
		writeProblem(w, r, http.StatusBadGateway, "", strings.TrimPrefix(err.Error(), redrive.ErrTracker.Error()+": "))
	case errors.Is(err, redrive.ErrPayloadForbidden):
		writeProblem(w, r, http.StatusForbidden, "", strings.TrimPrefix(err.Error(), redrive.ErrPayloadForbidden.Error()+": "))
	case errors.Is(err, redrive.ErrConflict):
		writeProblem(w, r, http.StatusConflict, "", strings.TrimPrefix(err.Error(), redrive.ErrConflict.Error()+": "))
	case errors.Is(err, redrive.ErrNotFound):
		writeProblem(w, r, http.StatusNotFound, "", "not found")
	case errors.Is(err, redrive.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, http.StatusServiceUnavailable, "", strings.TrimPrefix(err.Error(), redrive.ErrUnavailable.Error()+": "))
	case errors.Is(err, context.DeadlineExceeded):
		a.log.Warn("api: query timed out", "path", r.URL.Path, "query", r.URL.RawQuery, "timeout", a.core.QueryTimeout())
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, http.StatusServiceUnavailable, "",
			fmt.Sprintf("the query took longer than %s: narrow the filter (e.g. with created_from, topic or state)", a.core.QueryTimeout()))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		writeProblem(w, r, statusClientClosed, "", "request canceled")
	default:
		a.log.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeProblem(w, r, http.StatusInternalServerError, "", "internal error; the server log has the details")
	}
}

// writeJSON writes v as a JSON response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
