package avro_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/redrive/redrive/avro"
)

// FuzzDecode feeds arbitrary bytes to the decoder: it must never panic, every error must be a
// *DecodeError, and whatever decodes must re-encode to an event that decodes to the same value.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.bin"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	codec, err := avro.NewCodec(avro.Config{MaxSize: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := codec.DecodeEvent("errors", b)
		if err != nil {
			var de *avro.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is %T, not *DecodeError", err, err)
			}
			_, _ = codec.DecodeKey("errors", b)
			return
		}
		again, err := avro.EncodeEventWith(e, -1)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		e2, err := codec.DecodeEvent("errors", again)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoded event differs")
		}
		if md := e.Payload.FailedMessageMetadata; md != nil {
			_, _ = md.OriginalHeaders()
		}
	})
}

// FuzzHeaderList: the redrive-headers datum decoder never panics and round-trips what it accepts.
func FuzzHeaderList(f *testing.F) {
	seed, _ := avro.EncodeHeaderList([]avro.Header{{Name: "a", Value: []byte{1}}, {Name: "a"}, {Name: "", Value: []byte{}}})
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := avro.DecodeHeaderList(b)
		if err != nil {
			return
		}
		again, err := avro.EncodeHeaderList(hs)
		if err != nil {
			t.Fatal(err)
		}
		hs2, err := avro.DecodeHeaderList(again)
		if err != nil || !reflect.DeepEqual(hs, hs2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzParseEventJSON: the JSON reader used by `redrive event encode` never panics, and what it
// accepts encodes. The seeds include duplicate and wrongly cased member names.
func FuzzParseEventJSON(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	for _, c := range strictJSONCases(f) {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := avro.ParseEventJSON(b)
		if err != nil {
			return
		}
		if _, err := avro.MarshalEvent(e); err != nil {
			t.Fatalf("parsed event does not encode: %v", err)
		}
	})
}
