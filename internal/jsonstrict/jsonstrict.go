// Package jsonstrict decodes JSON documents that people and programs send to redrive, refusing
// what encoding/json lets through silently:
//
//   - a member name must match a field's name exactly, case included ("eventid" is not
//     "eventId");
//   - a member name may appear only once in an object (encoding/json lets the last one win);
//   - an unknown member is an error;
//   - the document is one JSON value, in valid UTF-8, with nothing after it.
//
// It is github.com/go-json-experiment/json (the proposed encoding/json/v2) with these options;
// struct tags are read as by encoding/json. Errors are *Error values that say what was wrong
// and where (a JSON pointer and a byte offset), with the client's text clipped.
package jsonstrict

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/redrive/redrive/internal/clip"
)

// Sentinel errors that an *Error wraps, for errors.Is.
var (
	// ErrDuplicateName marks a member name that appears twice in one object.
	ErrDuplicateName = jsontext.ErrDuplicateName
	// ErrUnknownName marks a member name that no field has, exactly.
	ErrUnknownName = json.ErrUnknownName
)

// maxQuoted bounds the bytes of a member name or pointer quoted in an error message.
const maxQuoted = 64

// Error is a document that Unmarshal or Decode refuses.
type Error struct {
	// Pointer locates the problem in the document as a JSON pointer (RFC 6901): for a
	// duplicate or unknown member, the member ("/identity/eventId"); otherwise the value
	// being decoded. "" is the whole document.
	Pointer string
	// Offset is the byte offset in the document where the problem was found, or -1.
	Offset int64
	// Err is the decoder's error; errors.Is(err, ErrDuplicateName) and
	// errors.Is(err, ErrUnknownName) tell the two kinds of bad member names.
	Err error
}

// Error says what was wrong and where.
func (e *Error) Error() string {
	at := ""
	if e.Offset >= 0 {
		at = fmt.Sprintf(" (byte %d)", e.Offset)
	}
	p := jsontext.Pointer(e.Pointer)
	switch {
	case errors.Is(e.Err, ErrDuplicateName):
		return fmt.Sprintf("member %q appears twice in %s%s", clip.Text(p.LastToken(), maxQuoted), objectName(p.Parent()), at)
	case errors.Is(e.Err, ErrUnknownName):
		return fmt.Sprintf("unknown member %q in %s%s (member names match exactly, case included)", clip.Text(p.LastToken(), maxQuoted), objectName(p.Parent()), at)
	}
	msg := e.Err.Error()
	for _, prefix := range []string{"json: ", "jsontext: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return "invalid JSON: " + msg
}

// Unwrap returns the decoder's error.
func (e *Error) Unwrap() error { return e.Err }

// objectName names the object at p in a message.
func objectName(p jsontext.Pointer) string {
	if p == "" {
		return "the top-level object"
	}
	return fmt.Sprintf("object %q", clip.Text(string(p), maxQuoted))
}

// options are the decoding options of the package: the defaults of go-json-experiment/json
// (exact names, no duplicates, valid UTF-8) and unknown members refused.
var options = json.RejectUnknownMembers(true)

// Unmarshal decodes the JSON document data into v, strictly (see the package comment).
func Unmarshal(data []byte, v any) error {
	return wrap(json.Unmarshal(data, v, options))
}

// Decode reads r to its end and decodes the JSON document into v, strictly (see the package
// comment). Bound r (io.LimitReader, http.MaxBytesReader): Decode reads all of it.
func Decode(r io.Reader, v any) error {
	return wrap(json.UnmarshalRead(r, v, options))
}

// wrap turns a decoder's error about the document into an *Error.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Offset: -1, Err: err}
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &syn):
		e.Pointer, e.Offset = string(syn.JSONPointer), syn.ByteOffset
	case errors.As(err, &sem):
		e.Pointer, e.Offset = string(sem.JSONPointer), sem.ByteOffset
	default:
		return err // a read error of Decode's reader (such as *http.MaxBytesError), kept as it is
	}
	return e
}
