package api

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/linkedin/goavro/v2"
)

// maxRenderBytes bounds the payloads that the hex, json and avro formats render; raw has no
// such bound.
const maxRenderBytes = 4 << 20

// getPayload serves GET /failures/{id}/payload?part=value|key&format=raw|hex|json|avro.
func (a *api) getPayload(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	q, err := parseQuery(r, nil, []string{"part", "format"})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	part := q.Get("part")
	switch part {
	case "":
		part = "value"
	case "value", "key":
	default:
		a.fail(w, r, badRequest("part", "%q is not value or key", truncate(part, 20)))
		return
	}
	format := q.Get("format")
	switch format {
	case "":
		format = "raw"
	case "raw", "hex", "json", "avro":
	default:
		a.fail(w, r, badRequest("format", "%q is not raw, hex, json or avro", truncate(format, 20)))
		return
	}
	ctx, cancel := a.queryContext(r)
	defer cancel()
	d, err := a.store.FailureByID(ctx, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	b := d.Value
	if part == "key" {
		if d.Key == nil {
			writeProblem(w, r, http.StatusNotFound, "part", "the failure's key is null")
			return
		}
		b = d.Key
	}
	if format != "raw" && len(b) > maxRenderBytes {
		a.fail(w, r, unprocessable("format", "the %s has %d bytes, more than format=%s renders (%d): use format=raw", part, len(b), format, maxRenderBytes))
		return
	}
	switch format {
	case "raw":
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
	case "avro":
		if a.avro == nil {
			a.fail(w, r, unprocessable("format", "no schema registry is configured, so Avro payloads cannot be decoded"))
			return
		}
		res, err := a.avro.decode(d.Topic, part, b)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// avroJSON is a payload decoded with its writer schema.
type avroJSON struct {
	// SchemaID is the registry id from the Confluent framing.
	SchemaID int `json:"schema_id"`
	// Subject is a subject under which the registry knows the schema, when it was looked up
	// by subject.
	Subject string `json:"subject,omitempty"`
	// Value is the datum in the Avro JSON encoding (unions as {"type": value}).
	Value json.RawMessage `json:"value"`
}

// maxCachedSchemas bounds the compiled writer schemas an avroDecoder keeps.
const maxCachedSchemas = 1000

// avroDecoder decodes Confluent-framed Avro payloads with writer schemas from a registry.
type avroDecoder struct {
	reg schemaregistry.Client

	mu     sync.Mutex
	codecs map[int]*writerSchema
}

type writerSchema struct {
	codec   *goavro.Codec
	subject string
}

func newAvroDecoder(reg schemaregistry.Client) *avroDecoder {
	return &avroDecoder{reg: reg, codecs: map[int]*writerSchema{}}
}

// decode decodes b, which must carry the Confluent framing (0x00, a 4-byte schema id, the
// datum), with the writer schema registered under that id.
func (d *avroDecoder) decode(topic, part string, b []byte) (*avroJSON, error) {
	if len(b) < 5 || b[0] != 0 {
		return nil, unprocessable("format", "the %s does not carry the Confluent framing (0x00 and a 4-byte schema id)", part)
	}
	id := int(binary.BigEndian.Uint32(b[1:5]))
	ws, err := d.schema(topic, part, id)
	if err != nil {
		return nil, err
	}
	native, rest, err := ws.codec.NativeFromBinary(b[5:])
	if err != nil {
		return nil, unprocessable("format", "the %s does not decode with schema id %d: %v", part, id, err)
	}
	if len(rest) > 0 {
		return nil, unprocessable("format", "the %s has %d bytes after the Avro datum of schema id %d", part, len(rest), id)
	}
	text, err := ws.codec.TextualFromNative(nil, native)
	if err != nil {
		return nil, unprocessable("format", "the %s decoded with schema id %d but cannot be shown as JSON: %v", part, id, err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, text, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(text)
	}
	return &avroJSON{SchemaID: id, Subject: ws.subject, Value: pretty.Bytes()}, nil
}

// schema returns the compiled writer schema registered under id. A registry serves a schema
// by id alone; the mock registry (and registries that scope ids by context) want a subject,
// so the TopicNameStrategy subject and then every subject the registry lists for the id are
// tried too.
func (d *avroDecoder) schema(topic, part string, id int) (*writerSchema, error) {
	d.mu.Lock()
	ws, ok := d.codecs[id]
	d.mu.Unlock()
	if ok {
		return ws, nil
	}
	var (
		info    schemaregistry.SchemaInfo
		subject string
		errs    []error
		found   bool
	)
	try := func(subjects ...string) {
		for _, s := range subjects {
			if found {
				return
			}
			i, err := d.reg.GetBySubjectAndID(s, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			info, subject, found = i, s, true
		}
	}
	try("", topic+"-"+part)
	if !found {
		if svs, err := d.reg.GetSubjectsAndVersionsByID(id); err == nil {
			for _, sv := range svs {
				try(sv.Subject)
			}
		}
	}
	if !found {
		return nil, unprocessable("format", "schema id %d is not in the schema registry: %v", id, errs[len(errs)-1])
	}
	if t := strings.ToUpper(info.SchemaType); t != "" && t != "AVRO" {
		return nil, unprocessable("format", "schema id %d is a %s schema, not Avro", id, t)
	}
	codec, err := goavro.NewCodec(info.Schema)
	if err != nil {
		return nil, unprocessable("format", "schema id %d does not compile: %v", id, err)
	}
	ws = &writerSchema{codec: codec, subject: subject}
	d.mu.Lock()
	if len(d.codecs) >= maxCachedSchemas {
		clear(d.codecs)
	}
	d.codecs[id] = ws
	d.mu.Unlock()
	return ws, nil
}
