package payload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/redrive/redrive/avro"
)

// jsonBaseURL is where a registry's JSON Schema and its references are placed for compiling,
// as the registry's own serializers place them: a reference named "address.json" is
// mem://input/address.json.
const jsonBaseURL = "mem://input/"

// jsonSchema is a compiled JSON Schema.
type jsonSchema struct {
	schema *jsonschema.Schema
}

// refusingLoader loads nothing: a schema compiles from the registry's texts alone, never from
// the network or the file system.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is not a reference of the schema", url)
}

// compileJSONSchema compiles the JSON Schema text info and the schemas it references.
func compileJSONSchema(ctx context.Context, reg avro.Registry, _ int, info avro.RegistrySchema) (*jsonSchema, error) {
	refs, err := references(ctx, reg, info)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	add := func(url, text string) error {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return fmt.Errorf("%s: %w", url, err)
		}
		return c.AddResource(url, doc)
	}
	if err := add(jsonBaseURL, info.Schema); err != nil {
		return nil, err
	}
	for name, s := range refs {
		if err := add(jsonBaseURL+name, s.Schema); err != nil {
			return nil, err
		}
	}
	sc, err := c.Compile(jsonBaseURL)
	if err != nil {
		return nil, err
	}
	return &jsonSchema{schema: sc}, nil
}

var printer = message.NewPrinter(language.English)

// validate validates the document doc (JSON) against the schema.
func (s *jsonSchema) validate(doc []byte) *Validation {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &Validation{Errors: []string{"the document does not parse: " + err.Error()}}
	}
	err = s.schema.Validate(inst)
	if err == nil {
		return &Validation{Valid: true}
	}
	v := &Validation{}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		v.Errors = []string{err.Error()}
		return v
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(v.Errors) >= MaxValidationErrors {
			return
		}
		if len(e.Causes) == 0 {
			v.Errors = append(v.Errors, pointer(e.InstanceLocation)+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return v
}

// pointer renders an instance location as a JSON pointer ("" is the document itself).
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "(the document)"
	}
	var b strings.Builder
	for _, s := range loc {
		b.WriteByte('/')
		s = strings.ReplaceAll(s, "~", "~0")
		b.WriteString(strings.ReplaceAll(s, "/", "~1"))
	}
	return b.String()
}

// decode decodes b (the whole framed payload) into out.
func (s *jsonSchema) decode(part string, b []byte, out *Decoded) (*Decoded, error) {
	doc := b[5:]
	var c bytes.Buffer
	if err := json.Compact(&c, doc); err != nil {
		return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrInvalidDatum,
			Detail: fmt.Sprintf("the %s is a JSON Schema payload with schema id %d, but what follows the schema id is not a JSON document: %v", part, out.SchemaID, err)}
	}
	out.JSON, out.Validation = c.Bytes(), s.validate(doc)
	return out, nil
}

// encode frames edited as like is; an edit that does not validate against the schema is
// refused, naming where.
func (s *jsonSchema) encode(part string, like, edited []byte) ([]byte, error) {
	var c bytes.Buffer
	if err := json.Compact(&c, edited); err != nil {
		return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrInvalidDatum,
			Detail: fmt.Sprintf("the edited %s is not a JSON document: %v", part, err)}
	}
	if v := s.validate(c.Bytes()); !v.Valid {
		return nil, &avro.PayloadError{Framing: avro.FramingConfluent, Err: avro.ErrInvalidDatum,
			Detail: fmt.Sprintf("the edited %s does not validate against its JSON Schema: %s", part, strings.Join(v.Errors, "; "))}
	}
	return append(append([]byte(nil), like[:5]...), c.Bytes()...), nil
}
