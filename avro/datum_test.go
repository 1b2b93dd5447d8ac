package avro

import (
	"errors"
	"testing"
)

func TestSchemaDatumJSON(t *testing.T) {
	t.Parallel()
	sc, err := CompileSchema(`{"type":"record","name":"R","namespace":"x","fields":[
		{"name":"id","type":"string"},{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"opt","type":["null","long"],"default":null}]}`)
	if err != nil {
		t.Fatal(err)
	}
	// id "ab", tags ["c"], opt 3.
	datum := []byte{0x04, 'a', 'b', 0x02, 0x02, 'c', 0x00, 0x02, 0x06}
	got, err := sc.DatumJSON(datum)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"ab","tags":["c"],"opt":{"long":3}}`; string(got) != want {
		t.Fatalf("JSON %s, want %s", got, want)
	}
	for name, tc := range map[string]struct {
		datum    []byte
		sentinel error
	}{
		"truncated":      {datum[:5], ErrTruncated},
		"trailing":       {append(append([]byte{}, datum...), 0), ErrTrailingBytes},
		"hostile count":  {[]byte{0x04, 'a', 'b', 0xfe, 0xff, 0xff, 0xff, 0x0f}, ErrTruncated},
		"bad union":      {[]byte{0x04, 'a', 'b', 0x00, 0x08}, ErrInvalidDatum},
		"negative bytes": {[]byte{0x03}, ErrInvalidDatum},
	} {
		_, err := sc.DatumJSON(tc.datum)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: err = %v, want a DecodeError wrapping %v", name, err, tc.sentinel)
		}
	}
	rich, err := CompileSchema(`{"type":"record","name":"Rich","namespace":"x","fields":[
		{"name":"z","type":"string"},
		{"name":"inner","type":["null",{"type":"record","name":"Inner","fields":[{"name":"b","type":"int"},{"name":"a","type":"int"}]}]},
		{"name":"m","type":{"type":"map","values":"boolean"}},
		{"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
		{"name":"f","type":{"type":"fixed","name":"Two","size":2}},
		{"name":"raw","type":"bytes"},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"d","type":"double"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	datum = []byte{0x06, '<', '&', '>', // z
		0x02, 0x04, 0x02, // inner: branch 1, b=2, a=1
		0x04, 0x02, 'y', 0x01, 0x02, 'x', 0x00, 0x00, // m {"y":true,"x":false}
		0x02,       // e GREEN
		0x00, 0xff, // f
		0x04, 'h', 0x80, // raw
		0x00,                                           // at 0
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x7f} // d NaN
	got, err = rich.DatumJSON(datum)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z":"<&>","inner":{"x.Inner":{"b":2,"a":1}},"m":{"x":false,"y":true},"e":"GREEN","f":"\u0000ÿ",` +
		"\"raw\":\"h\u0080\"," + `"at":"1970-01-01T00:00:00Z","d":"NaN"}`
	if string(got) != want {
		t.Fatalf("JSON\n%s\nwant\n%s", got, want)
	}
	if _, err := CompileSchema(`{"type":"nope"}`); err == nil {
		t.Error("a bad schema compiles")
	}
	if ev, err := CompileSchema(EventSchema()); err != nil || ev.Fingerprint() != EventFingerprint() {
		t.Errorf("the event schema's fingerprint differs: %v", err)
	}
}
