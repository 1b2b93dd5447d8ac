package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// decodeBody decodes the JSON body of r into v: exactly one JSON value, no unknown fields, at
// most the configured body size. An empty body is allowed only when optional is true (v is
// then left as it is). Errors are *requestError values naming the field at fault.
func (a *api) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &requestError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
				detail: fmt.Sprintf("%q is not application/json", ct)}
		}
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) && optional {
			return nil
		}
		return a.jsonError(err)
	}
	// Exactly one value: anything but white space after it is an error.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return a.jsonError(err)
		}
		return badRequest("body", "unexpected data after the JSON value")
	}
	return nil
}

// jsonError turns a decoding error into a *requestError.
func (a *api) jsonError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig *http.MaxBytesError
	)
	switch {
	case errors.As(err, &tooBig):
		return &requestError{status: http.StatusRequestEntityTooLarge, field: "body",
			detail: fmt.Sprintf("larger than %d bytes", a.cfg.MaxBodyBytes)}
	case errors.Is(err, io.EOF):
		return badRequest("body", "empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("body", "truncated JSON")
	case errors.As(err, &syntax):
		return badRequest("body", "malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return badRequest(field, "wrong type: got JSON %s, want %s", typ.Value, jsonTypeName(typ.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(name, "unknown field")
	}
	return badRequest("body", "cannot decode JSON: %s", err.Error())
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
	case "ptr":
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
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	o.Value = &s
	return nil
}
