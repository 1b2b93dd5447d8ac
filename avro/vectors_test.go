package avro_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/franzsr"
)

// The contract's test vectors were made by Apache Avro's own implementation; testdata/vectors is
// a copy of shared/contracts/vectors (TestVectorsMatchContract keeps them in step).
const vectorDir = "testdata/vectors"

func vectorNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.datum.bin"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors in %s: %v", vectorDir, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".datum.bin"))
	}
	return names
}

func readFile(name string) ([]byte, error) { return os.ReadFile(filepath.Join(vectorDir, name)) }

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func multiEntryMap(e *avro.Event) bool {
	md := e.Payload.FailedMessageMetadata
	return md != nil && len(md.Headers) >= 2
}

func TestVectors(t *testing.T) {
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range vectorNames(t) {
		t.Run(name, func(t *testing.T) {
			want, err := avro.ParseEventJSON(read(t, name+".json"))
			if err != nil {
				t.Fatalf("parse JSON: %v", err)
			}
			datum := read(t, name+".datum.bin")
			got, err := avro.UnmarshalEvent(datum)
			if err != nil {
				t.Fatalf("decode datum: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("datum decodes to\n%+v\nwant\n%+v", got, want)
			}
			// The JSON rendering is the vector's own JSON, value for value.
			js, err := avro.EventJSON(got)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			_ = json.Unmarshal(js, &a)
			_ = json.Unmarshal(read(t, name+".json"), &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("EventJSON =\n%s\nwant\n%s", js, read(t, name+".json"))
			}

			reencoded, err := avro.MarshalEvent(got)
			if err != nil {
				t.Fatal(err)
			}
			if multiEntryMap(got) {
				again, err := avro.UnmarshalEvent(reencoded)
				if err != nil || !reflect.DeepEqual(again, want) {
					t.Fatalf("re-encoded datum decodes to %+v, %v", again, err)
				}
			} else if !bytes.Equal(reencoded, datum) {
				t.Fatalf("re-encoded datum differs:\n got %x\nwant %x", reencoded, datum)
			}

			for _, framed := range []struct {
				file string
				id   int
			}{{name + ".single.bin", -1}, {name + ".confluent7.bin", 7}} {
				raw := read(t, framed.file)
				got, err := codec.DecodeEvent("errors", raw)
				if err != nil {
					t.Fatalf("%s: %v", framed.file, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s decodes to %+v", framed.file, got)
				}
				enc, err := avro.EncodeEventWith(got, framed.id)
				if err != nil {
					t.Fatal(err)
				}
				if !multiEntryMap(got) && !bytes.Equal(enc, raw) {
					t.Fatalf("%s: re-encoded differs:\n got %x\nwant %x", framed.file, enc, raw)
				}
			}

			keyRaw := read(t, name+".key.single.bin")
			key, err := codec.DecodeKey("errors", keyRaw)
			if err != nil {
				t.Fatal(err)
			}
			if key.Key != want.Identity.IdempotenceID {
				t.Fatalf("key = %q, want %q", key.Key, want.Identity.IdempotenceID)
			}
			kenc, err := codec.EncodeKey("errors", key)
			if err != nil || !bytes.Equal(kenc, keyRaw) {
				t.Fatalf("key re-encoded = %x, %v; want %x", kenc, err, keyRaw)
			}
		})
	}
}

func TestFingerprints(t *testing.T) {
	var want struct {
		Event string `json:"event_crc64_avro_le"`
		Key   string `json:"key_crc64_avro_le"`
	}
	if err := json.Unmarshal(read(t, "fingerprints.json"), &want); err != nil {
		t.Fatal(err)
	}
	ev, key := avro.EventFingerprint(), avro.KeyFingerprint()
	if got := hex.EncodeToString(ev[:]); got != want.Event {
		t.Errorf("event fingerprint = %s, want %s", got, want.Event)
	}
	if got := hex.EncodeToString(key[:]); got != want.Key {
		t.Errorf("key fingerprint = %s, want %s", got, want.Key)
	}
}

// TestVectorsMatchContract keeps testdata/vectors identical to the shared contract, where the
// shared folder sits beside the repository.
func TestVectorsMatchContract(t *testing.T) {
	shared := filepath.Join("..", "..", "shared", "contracts", "vectors")
	entries, err := os.ReadDir(shared)
	if err != nil {
		t.Skipf("shared contract folder not beside the repository: %v", err)
	}
	for _, e := range entries {
		a, err := os.ReadFile(filepath.Join(shared, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if b := read(t, e.Name()); !bytes.Equal(a, b) {
			t.Errorf("testdata/vectors/%s differs from the shared contract", e.Name())
		}
	}
}

func TestRegistryRoundTrip(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := franzsr.Dial([]string{fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := avro.NewCodec(avro.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	want, err := avro.ParseEventJSON(read(t, "temporary-with-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := codec.EncodeEvent("errors", want)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 {
		t.Fatalf("registry codec wrote first byte 0x%02x, want Confluent framing", b[0])
	}
	if !fake.SubjectExists(avro.Subject("errors", avro.EventFullName)) {
		t.Fatal("the event schema is not registered under its TopicRecordNameStrategy subject")
	}
	got, err := codec.DecodeEvent("errors", b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	// An id the registry does not know is a clear error.
	b[4]++
	_, err = codec.DecodeEvent("errors", b)
	var de *avro.DecodeError
	if !errors.As(err, &de) || de.Check != avro.CheckSchemaID || !errors.Is(err, avro.ErrUnknownSchema) {
		t.Fatalf("unknown id: err = %v", err)
	}
	// Single-object input still decodes with a registry configured.
	single := read(t, "temporary-with-metadata.single.bin")
	if _, err := codec.DecodeEvent("errors", single); err != nil {
		t.Fatal(err)
	}
}
