package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const vectors = "../../avro/testdata/vectors"

func runCLI(t *testing.T, stdinBytes []byte, args ...string) (int, []byte, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, bytes.NewReader(stdinBytes), &out, &errOut)
	return code, out.Bytes(), errOut.String()
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestEventDecodeVectors(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(vectors, "*.json"))
	for _, jf := range files {
		name := strings.TrimSuffix(filepath.Base(jf), ".json")
		if name == "fingerprints" {
			continue
		}
		want, _ := os.ReadFile(jf)
		for _, framing := range []string{"single", "confluent7"} {
			file := filepath.Join(vectors, name+"."+framing+".bin")
			code, out, stderr := runCLI(t, nil, "event", "decode", file)
			if code != 0 || !jsonEqual(t, out, want) {
				t.Fatalf("decode %s: exit %d, stderr %q\n%s", file, code, stderr, out)
			}
			// From standard input too.
			raw, _ := os.ReadFile(file)
			code, out, _ = runCLI(t, raw, "event", "decode")
			if code != 0 || !jsonEqual(t, out, want) {
				t.Fatalf("decode stdin %s: exit %d", file, code)
			}
		}
		code, out, _ := runCLI(t, nil, "event", "decode", "--key", filepath.Join(vectors, name+".key.single.bin"))
		if code != 0 || !strings.Contains(string(out), `"key"`) {
			t.Fatalf("decode key: exit %d: %s", code, out)
		}
	}
}

func TestEventEncodeVectors(t *testing.T) {
	for _, name := range []string{"minimal-permanent", "unknown-empty-values", "temporary-with-metadata"} {
		js, _ := os.ReadFile(filepath.Join(vectors, name+".json"))
		for _, c := range []struct {
			file string
			args []string
		}{
			{name + ".single.bin", []string{"event", "encode"}},
			{name + ".single.bin", []string{"event", "encode", "--framing", "single"}},
			{name + ".confluent7.bin", []string{"event", "encode", "--framing", "confluent", "--schema-id", "7"}},
		} {
			want, _ := os.ReadFile(filepath.Join(vectors, c.file))
			code, out, stderr := runCLI(t, js, c.args...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
			}
			if name == "temporary-with-metadata" {
				// Maps with several entries may be written in another order: compare decoded values.
				code, back, _ := runCLI(t, out, "event", "decode")
				if code != 0 || !jsonEqual(t, back, js) {
					t.Fatalf("%v: re-decoded value differs", c.args)
				}
				continue
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("%v: got %x, want %x", c.args, out, want)
			}
		}
	}
}

func TestEventBadInput(t *testing.T) {
	good, _ := os.ReadFile(filepath.Join(vectors, "minimal-permanent.single.bin"))
	tests := []struct {
		name  string
		in    []byte
		args  []string
		code  int
		check string
	}{
		{"empty", nil, []string{"event", "decode"}, 1, "empty input"},
		{"JSON instead of Avro", []byte(`{"a":1}`), []string{"event", "decode"}, 1, "unknown first byte"},
		{"truncated", good[:len(good)-3], []string{"event", "decode"}, 1, "truncated datum"},
		{"trailing", append(append([]byte{}, good...), 1), []string{"event", "decode"}, 1, "trailing bytes"},
		{"fingerprint", append([]byte{0xC3, 1, 0, 0, 0, 0, 0, 0, 0, 0}, good[10:]...), []string{"event", "decode"}, 1, "fingerprint mismatch"},
		{"size limit", good, []string{"event", "decode", "--max-size", "10"}, 1, "size limit"},
		{"missing file", nil, []string{"event", "decode", "/nonexistent/file"}, 1, "no such file"},
		{"bad JSON", []byte(`{"identity": 1}`), []string{"event", "encode"}, 1, "event JSON"},
		{"unknown JSON field", []byte(`{"bogus": 1}`), []string{"event", "encode"}, 1, `unknown member "bogus" in the top-level object`},
		{"duplicate JSON member", []byte(`{"identity": {"eventId": "a", "eventId": "b"}}`), []string{"event", "encode"}, 1,
			`standard input: event JSON: member "eventId" appears twice in object "/identity"`},
		{"JSON member in another case", []byte(`{"Identity": {}}`), []string{"event", "encode"}, 1,
			`unknown member "Identity" in the top-level object (byte 1) (member names match exactly, case included)`},
		{"unknown flag", nil, []string{"event", "decode", "--bogus"}, 2, "flag provided but not defined"},
		{"unknown action", nil, []string{"event", "frobnicate"}, 2, "unknown action"},
		{"no action", nil, []string{"event"}, 2, "Usage"},
		{"bad framing", nil, []string{"event", "encode", "--framing", "xml"}, 2, "--framing"},
		{"confluent without id", nil, []string{"event", "encode", "--framing", "confluent"}, 2, "--schema-id"},
		{"two files", nil, []string{"event", "decode", "a", "b"}, 2, "at most one FILE"},
		{"unknown command", nil, []string{"frobnicate"}, 2, "unknown command"},
		{"no command", nil, nil, 2, "Usage"},
		{"version extra arg", nil, []string{"version", "x"}, 2, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.in, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.check) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tt.code, tt.check)
			}
			if tt.code == 1 && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("error is not one line: %q", stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, nil, "version")
	if code != 0 || !strings.HasPrefix(string(out), "redrive ") {
		t.Fatalf("exit %d: %s", code, out)
	}
}
