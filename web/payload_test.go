package web

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/payload"
)

func TestHexDump(t *testing.T) {
	t.Parallel()
	lines := hexDump([]byte("Hello,\x00\x01\xff world! and more bytes"))
	want := []hexLine{
		{"00000000", "48 65 6c 6c 6f 2c 00 01  ff 20 77 6f 72 6c 64 21", "Hello,... world!"},
		{"00000010", "20 61 6e 64 20 6d 6f 72  65 20 62 79 74 65 73   ", " and more bytes"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, lines[i], want[i])
		}
	}
	if len(hexDump(nil)) != 0 {
		t.Error("an empty value has hex lines")
	}
}

// segText renders segments with escapes in [brackets].
func segText(segs []textSeg) string {
	var b strings.Builder
	for _, s := range segs {
		if s.Esc {
			b.WriteString("[" + s.S + "]")
		} else {
			b.WriteString(s.S)
		}
	}
	return b.String()
}

func TestTextView(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want string // escapes in [brackets]
	}{
		{"plain", "héllo\n\tworld", "héllo\n\tworld"},
		{"control bytes", "a\x00b\x1b\x7f", "a[\\x00]b[\\x1b\\x7f]"},
		{"carriage return", "a\r\nb", "a[\\x0d]\nb"},
		{"invalid UTF-8", "ok\xff\xfe\xc3", "ok[\\xff\\xfe\\xc3]"},
		{"bidi override", "user\u202etxt.exe", "user[\\u202e]txt.exe"},
		{"zero width and BOM", "a\u200bb\ufeff", "a[\\u200b]b[\\ufeff]"},
		{"bidi isolate and tag", "a\u2066b\U000e0041", "a[\\u2066]b[\\U000e0041]"},
		{"C1 control", "a\u0085b", "a[\\u0085]b"},
		{"replacement character kept", "a\ufffdb", "a\ufffdb"},
		{"script", "<script>", "<script>"},
	} {
		if got := segText(textView([]byte(tc.in))); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBytesView(t *testing.T) {
	t.Parallel()
	v := newBytesView([]byte(`{"a":[1,2]}`), false, 4)
	if !v.Cut || v.Shown != 4 || v.Size != 11 || v.Hex != "00000000  7b 22 61 22"+strings.Repeat(" ", 39)+"|{\"a\"|\n" {
		t.Fatalf("cut view = %+v", v)
	}
	v.addJSON([]byte(`{"a":[1,2]}`))
	if got := segText(v.JSON); got != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("JSON = %q", got)
	}
	for in, note := range map[string]string{"": "empty", "{": "not a JSON", "\xff": "not UTF-8"} {
		var w bytesView
		w.addJSON([]byte(in))
		if w.JSON != nil || !strings.Contains(w.JSONNote, note) {
			t.Errorf("%q: JSON %q, note %q", in, segText(w.JSON), w.JSONNote)
		}
	}
	noise := make([]byte, 20000)
	for i := range noise {
		noise[i] = byte(i*7) | 0x80
		if i%2 == 0 {
			noise[i] = 'a'
		}
	}
	if v := newBytesView(noise, false, len(noise)); len(v.Text) != maxTextSegs || v.TextShown != maxTextSegs || v.Shown != len(noise) {
		t.Errorf("noise: %d text runs for %d bytes", len(v.Text), v.TextShown)
	}
	if got := (textSeg{S: `\x00\u202e\xff\U000e0041`, Esc: true}).bytes(); got != 9 {
		t.Errorf("escape run stands for %d bytes, want 9", got)
	}
	if tab := defaultTab(&bytesView{Shown: 8, Text: textView([]byte("\x00\x01\x02\x03abcd"))}); tab != "hex" {
		t.Errorf("mostly binary value opens the %s view", tab)
	}
	if tab := defaultTab(&bytesView{Shown: 20, Text: textView([]byte("plain text, one \x00 NUL"))}); tab != "text" {
		t.Errorf("mostly text value opens the %s view", tab)
	}
}

func TestAvroView(t *testing.T) {
	t.Parallel()
	dec, err := payload.New(payload.Config{Schemas: []string{paymentSchema}})
	if err != nil {
		t.Fatal(err)
	}
	single := paymentValue(t, "p1", 5, "EUR")
	var bv bytesView
	bv.addDecoded(dec.Decode("payments", "value", single))
	if !strings.Contains(segText(bv.Decoded), `"currency": "EUR"`) || !strings.Contains(bv.DecodedNote, "single-object") {
		t.Fatalf("decoded %q (%s)", segText(bv.Decoded), bv.DecodedNote)
	}

	for name, tc := range map[string]struct {
		in   []byte
		note string
	}{
		"truncated":       {single[:len(single)-2], "does not decode"},
		"missing field":   {append(append([]byte{}, single[:10]...), 0x02, 'p', 0xfe, 0xff, 0xff, 0xff, 0x0f), "does not decode"},
		"unknown schema":  {append([]byte{0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, single[10:]...), "not among the configured schemas"},
		"confluent":       {[]byte{0, 0, 0, 0, 7, 2}, "no schema registry"},
		"not avro":        {[]byte("a text"), "neither JSON nor framed"},
		"plain JSON":      {[]byte(`{"a":1}`), "plain JSON"},
		"trailing bytes":  {append(append([]byte{}, single...), 0), "does not decode"},
		"empty framing":   {[]byte{0xc3, 0x01}, "neither JSON nor framed"},
		"event as record": {mustEncodeEvent(t), "Decoded"},
	} {
		var bv bytesView
		bv.addDecoded(dec.Decode("payments", "value", tc.in))
		if !strings.Contains(bv.DecodedNote, tc.note) || !strings.HasSuffix(bv.DecodedNote, ".") {
			t.Errorf("%s: note %q, want %q", name, bv.DecodedNote, tc.note)
		}
		if (bv.Decoded != nil) != (tc.note == "Decoded") {
			t.Errorf("%s: Avro view %q", name, segText(bv.Decoded))
		}
	}
}

// paymentValue returns a PaymentCaptured record (paymentSchema) in Avro single-object encoding.
func paymentValue(t testing.TB, id string, cents int64, currency string) []byte {
	t.Helper()
	sc, err := avro.CompileSchema(paymentSchema)
	if err != nil {
		t.Fatal(err)
	}
	fp := sc.Fingerprint()
	b := append([]byte{0xc3, 0x01}, fp[:]...)
	long := func(v int64) {
		u := uint64(v<<1) ^ uint64(v>>63) // zig-zag
		for u >= 0x80 {
			b = append(b, byte(u)|0x80)
			u >>= 7
		}
		b = append(b, byte(u))
	}
	str := func(s string) { long(int64(len(s))); b = append(b, s...) }
	str(id)
	long(cents)
	str(currency)
	return b
}

// mustEncodeEvent returns an MPFE in single-object encoding: redrive's own schemas are known.
func mustEncodeEvent(t *testing.T) []byte {
	t.Helper()
	e := newEvent("orders", 1, "billing", "X", avro.Permanent, nil, []byte("v"), "boom")
	b, err := avro.EncodeEventWith(e, -1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
