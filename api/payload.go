package api

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
)

// maxRenderBytes bounds the payloads that the hex, json and avro formats render; raw has no
// such bound.
const maxRenderBytes = 4 << 20

// getPayload serves GET /failures/{id}/payload?part=value|key&format=raw|hex|json|avro|decoded.
func (a *api) getPayload(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	var q map[string][]string
	if err == nil {
		q, err = parseQuery(r, []string{"part", "format"})
	}
	var part operator.Part
	if err == nil {
		part, err = operator.ParsePart("part", first(q["part"]))
	}
	format := first(q["format"])
	switch format {
	case "":
		format = "raw"
	case "raw", "hex", "json", "avro", "decoded":
	default:
		if err == nil {
			err = badRequest("format", "%q is not raw, hex, json, avro or decoded", clip.Text(format, clip.Default))
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if format == "avro" || format == "decoded" {
		want := payload.FormatAvro
		if format == "decoded" {
			want = ""
		}
		d, err := a.core.DecodedPayload(r.Context(), id, part, reader(r), want)
		var pe *avro.PayloadError
		switch {
		case errors.Is(err, redrive.ErrNullPart):
			writeProblem(w, r, http.StatusNotFound, "part", "the failure's key is null")
		case errors.As(err, &pe) && format == "avro" && errors.Is(err, avro.ErrUnknownFraming):
			a.fail(w, r, unprocessable("format", "%s: use format=decoded", pe.Detail))
		case errors.As(err, &pe):
			a.fail(w, r, unprocessable("format", "%s", pe.Detail))
		case err != nil:
			a.fail(w, r, err)
		case format == "decoded":
			writeJSON(w, http.StatusOK, newDecodedJSON(d))
		default:
			writeJSON(w, http.StatusOK, newAvroJSON(d))
		}
		return
	}
	p, err := a.core.Payload(r.Context(), id, part, reader(r), "format="+format)
	if errors.Is(err, redrive.ErrNullPart) {
		writeProblem(w, r, http.StatusNotFound, "part", "the failure's key is null")
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	b := p.Bytes
	if format != "raw" && len(b) > maxRenderBytes {
		a.fail(w, r, unprocessable("format", "the %s has %d bytes, more than format=%s renders (%d): use format=raw", part, len(b), format, maxRenderBytes))
		return
	}
	switch format {
	case "raw":
		if p.Masked {
			w.Header().Set("X-Redrive-Masked", "true")
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s.bin"`, id, part))
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	case "hex":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(hex.Dump(b)))
	case "json":
		var out bytes.Buffer
		if !json.Valid(b) || json.Indent(&out, b, "", "  ") != nil {
			a.fail(w, r, unprocessable("format", "the %s is not JSON (try format=hex or format=avro)", part))
			return
		}
		out.WriteByte('\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out.Bytes())
	}
}

// first returns the first value, or "".
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// avroJSON is a payload decoded with its writer schema.
type avroJSON struct {
	// Framing is "confluent" or "single-object".
	Framing string `json:"framing"`
	// SchemaID is the registry id from the Confluent framing; null for single-object.
	SchemaID *int `json:"schema_id"`
	// Fingerprint is the schema's CRC-64-AVRO fingerprint (hex) for single-object; null otherwise.
	Fingerprint *string `json:"fingerprint"`
	// Subject is a subject under which the registry knows the schema, when it was looked up
	// by subject.
	Subject string `json:"subject,omitempty"`
	// Value is the datum in the Avro JSON encoding (unions as {"type": value}).
	Value json.RawMessage `json:"value"`
}

func newAvroJSON(d *payload.Decoded) avroJSON {
	out := avroJSON{Framing: d.Framing, Subject: d.Subject, Value: d.JSON}
	if d.Framing == avro.FramingConfluent {
		out.SchemaID = &d.SchemaID
	} else {
		out.Fingerprint = &d.Fingerprint
	}
	return out
}

// decodedJSON is a payload decoded with its writer schema, whatever its format.
type decodedJSON struct {
	// Format is "avro", "protobuf", "jsonschema" or "json" (plain JSON, unframed).
	Format string `json:"format"`
	// Framing is "confluent", "single-object" or "none".
	Framing string `json:"framing"`
	// Description names the format, framing and schema in a sentence.
	Description string `json:"description"`
	// SchemaID is the registry id from the Confluent framing; null otherwise.
	SchemaID *int `json:"schema_id"`
	// Fingerprint is an Avro single-object payload's schema fingerprint (hex); null otherwise.
	Fingerprint *string `json:"fingerprint"`
	// Subject is a subject under which the registry knows the schema, when it was looked up
	// by subject.
	Subject string `json:"subject,omitempty"`
	// MessageType and MessageIndexes are a Protobuf payload's message type and the message
	// indexes of its framing.
	MessageType    string `json:"message_type,omitempty"`
	MessageIndexes []int  `json:"message_indexes,omitempty"`
	// Value is the payload as JSON: Avro's JSON encoding, protojson, or the document.
	Value json.RawMessage `json:"value"`
	// Validation is a JSON Schema payload's validation result; absent for other formats.
	Validation *validationJSON `json:"validation,omitempty"`
	// Note says what the value does not show, when anything.
	Note string `json:"note,omitempty"`
}

// validationJSON is the result of validating a document against its JSON Schema.
type validationJSON struct {
	Valid  bool     `json:"valid"`
	Errors []string `json:"errors"`
}

func newDecodedJSON(d *payload.Decoded) decodedJSON {
	out := decodedJSON{Format: d.Format, Framing: d.Framing, Description: d.Describe(), Subject: d.Subject,
		MessageType: d.MessageType, MessageIndexes: d.MessageIndexes, Value: d.JSON, Note: d.Note}
	switch d.Framing {
	case avro.FramingConfluent:
		out.SchemaID = &d.SchemaID
	case avro.FramingSingleObject:
		out.Fingerprint = &d.Fingerprint
	}
	if v := d.Validation; v != nil {
		out.Validation = &validationJSON{Valid: v.Valid, Errors: append([]string{}, v.Errors...)}
	}
	return out
}
