package web

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/redrive/redrive/auth"
)

// formLimitKey is the context key of a route's bound on a posted form (withFormLimit).
type formLimitKey struct{}

// withFormLimit raises the bound of the form posted to next from maxFormBytes to limit, for a
// signed-in user with role: for a form that uploads a file larger than a page of ids. Others
// keep the default bound, so that no one else can make the server store a large upload.
func withFormLimit(role auth.Role, limit int64, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s := sessionFrom(r.Context()); s.authed && s.principal.Role.Allows(role) {
			r = r.WithContext(context.WithValue(r.Context(), formLimitKey{}, limit))
		}
		next(w, r)
	}
}

// formLimit returns the bound on the form posted with r: maxFormBytes unless its route raised
// it.
func formLimit(r *http.Request) int64 {
	if n, ok := r.Context().Value(formLimitKey{}).(int64); ok {
		return n
	}
	return maxFormBytes
}

// maxFormMemory is how much of a multipart form is kept in memory; larger uploads are kept in
// temporary files until the request ends.
const maxFormMemory = 1 << 20

// readPostedForm reads the form of a POST, URL-encoded or multipart alike, so that every field
// (the CSRF token first of all) is in r.PostForm before anything checks it. A multipart form's
// files stay available through r.FormFile and are removed when the request ends. It answers the
// request (413 for a form over its route's bound, 400 for one that cannot be read) and returns
// false when the form cannot be read.
func (h *handler) readPostedForm(w http.ResponseWriter, r *http.Request) bool {
	limit := formLimit(r)
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	var err error
	if ct, _, perr := mime.ParseMediaType(r.Header.Get("Content-Type")); perr == nil && ct == "multipart/form-data" {
		err = r.ParseMultipartForm(maxFormMemory)
		if r.MultipartForm != nil {
			// The server removes the files of the request it created, not of this one (a copy
			// with the session in its context): remove them when the response is done.
			form := r.MultipartForm
			context.AfterFunc(r.Context(), func() { _ = form.RemoveAll() })
		}
	} else {
		err = r.ParseForm()
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		h.renderError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %s.", byteSize(int(limit))))
		return false
	case err != nil:
		h.renderError(w, r, http.StatusBadRequest, "The form could not be read.")
		return false
	}
	return true
}
