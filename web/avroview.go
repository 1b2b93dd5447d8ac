package web

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/redrive/redrive/avro"
)

// avroViewer decodes payloads framed as Avro (single-object encoding or the Confluent wire
// format) with the schemas it knows or finds in the registry.
type avroViewer struct {
	registry schemaregistry.Client
	known    map[[8]byte]*avro.Schema

	mu  sync.Mutex
	ids map[int]*avro.Schema // registry id -> schema, compiled once
}

// maxAvroView bounds the size of a payload decoded for the Avro view.
const maxAvroView = 1 << 20

func newAvroViewer(registry schemaregistry.Client, schemas []string) (*avroViewer, error) {
	v := &avroViewer{registry: registry, known: map[[8]byte]*avro.Schema{}, ids: map[int]*avro.Schema{}}
	all := append([]string{avro.EventSchema(), avro.KeySchema()}, schemas...)
	for i, s := range all {
		sc, err := avro.CompileSchema(s)
		if err != nil {
			return nil, fmt.Errorf("schema %d: %w", i-2, err)
		}
		v.known[sc.Fingerprint()] = sc
	}
	return v, nil
}

// view fills the Avro view of b: the decoded datum, or a note on why there is none.
func (v *avroViewer) view(b []byte, bv *bytesView) {
	switch {
	case len(b) > maxAvroView:
		bv.AvroNote = fmt.Sprintf("The value is larger than %s; it was not decoded.", byteSize(maxAvroView))
	case len(b) >= 10 && b[0] == 0xc3 && b[1] == 0x01:
		fp := [8]byte(b[2:10])
		sc, ok := v.known[fp]
		if !ok {
			bv.AvroNote = "Avro single-object encoding with schema fingerprint " + hex.EncodeToString(fp[:]) +
				", which is not among the configured schemas."
			return
		}
		v.decode(sc, b[10:], "single-object encoding, schema fingerprint "+hex.EncodeToString(fp[:]), bv)
	case len(b) >= 5 && b[0] == 0x00:
		id := int(binary.BigEndian.Uint32(b[1:5]))
		if v.registry == nil {
			bv.AvroNote = fmt.Sprintf("Possibly the Confluent wire format with schema id %d; no schema registry is configured.", id)
			return
		}
		sc, err := v.schemaByID(id)
		if err != nil {
			bv.AvroNote = fmt.Sprintf("Possibly the Confluent wire format, but schema id %d could not be read from the registry: %v", id, err)
			return
		}
		v.decode(sc, b[5:], fmt.Sprintf("Confluent wire format, schema id %d", id), bv)
	default:
		bv.AvroNote = "The value is not framed as Avro (single-object encoding or Confluent wire format)."
	}
}

func (v *avroViewer) decode(sc *avro.Schema, datum []byte, how string, bv *bytesView) {
	out, err := sc.DatumJSON(datum)
	if err != nil {
		var de *avro.DecodeError
		if errors.As(err, &de) {
			bv.AvroNote = how + ", but the datum does not decode: " + de.Error()
		} else {
			bv.AvroNote = how + ", but the datum does not decode."
		}
		return
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(out)
	}
	bv.Avro, bv.AvroNote = textView(pretty.Bytes()), "Decoded from "+how+"."
}

func (v *avroViewer) schemaByID(id int) (*avro.Schema, error) {
	v.mu.Lock()
	sc, ok := v.ids[id]
	v.mu.Unlock()
	if ok {
		return sc, nil
	}
	info, err := v.registry.GetBySubjectAndID("", id)
	if err != nil {
		return nil, err
	}
	if info.SchemaType != "" && info.SchemaType != "AVRO" {
		return nil, fmt.Errorf("the schema is %s, not Avro", info.SchemaType)
	}
	sc, err = avro.CompileSchema(info.Schema)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.ids[id] = sc
	v.mu.Unlock()
	return sc, nil
}
