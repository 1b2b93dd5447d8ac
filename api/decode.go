package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/redrive/redrive/internal/jsonstrict"
)

// decodeBody decodes the JSON body of r into v, strictly: exactly one JSON value of at most
// the configured size, member names matching exactly (case included), no member twice, no
// unknown member, strings in valid UTF-8 (internal/jsonstrict). An empty body is allowed only
// when optional is true (v is then left as it is). Errors are *requestError values naming the
// member at fault.
func (a *api) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &requestError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
				detail: fmt.Sprintf("%q is not application/json", ct)}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &requestError{status: http.StatusRequestEntityTooLarge, field: "body",
				detail: fmt.Sprintf("larger than %d bytes", a.cfg.MaxBodyBytes)}
		}
		return badRequest("body", "could not be read")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return badRequest("body", "empty; a JSON object is required")
	}
	return jsonError(jsonstrict.Unmarshal(body, v))
}

// jsonError turns a decoding error into a *requestError naming the member at fault.
func jsonError(err error) error {
	if err == nil {
		return nil
	}
	var (
		syn *jsontext.SyntacticError
		sem *json.SemanticError
	)
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return badRequest(pointerField(err), "given twice: each member may appear once")
	case errors.Is(err, json.ErrUnknownName):
		return badRequest(pointerField(err), "unknown member (names are matched exactly, case included)")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("body", "truncated JSON")
	case errors.As(err, &syn):
		return badRequest(pointerField(err), "malformed JSON at byte %d: %s", syn.ByteOffset, cause(syn.Err))
	case errors.As(err, &sem):
		field := pointerField(err)
		if sem.GoType != nil && sem.JSONKind != 0 {
			return badRequest(field, "wrong type: got JSON %s, want %s", kindName(sem.JSONKind), jsonTypeName(sem.GoType.Kind().String()))
		}
		return badRequest(field, "%s", cause(sem.Err))
	}
	return badRequest("body", "cannot decode JSON")
}

// pointerField names the member of a decoding error: its JSON pointer as a dotted path
// ("filter.state"), or "body" at the top.
func pointerField(err error) string {
	var (
		syn *jsontext.SyntacticError
		sem *json.SemanticError
		p   jsontext.Pointer
	)
	switch {
	case errors.As(err, &sem):
		p = sem.JSONPointer
	case errors.As(err, &syn):
		p = syn.JSONPointer
	}
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]") // an array index
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// cause returns the text of err, or a generic one.
func cause(err error) string {
	if err == nil {
		return "not valid here"
	}
	return strings.TrimPrefix(err.Error(), "jsontext: ")
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "slice", "array":
		return "array"
	case "struct", "map":
		return "object"
	case "bool":
		return "boolean"
	case "ptr", "interface":
		return "value"
	}
	return "number"
}

// optionalString is a JSON member that may be absent, null, or a string.
type optionalString struct {
	Set   bool
	Value *string
}

// UnmarshalJSON records that the member is present, with null as a nil Value.
func (o *optionalString) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(bytes.TrimSpace(b)) == "null" {
		o.Value = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("want a string or null")
	}
	o.Value = &s
	return nil
}
