package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/payload"
)

// bytesView shows a key, value or header value honestly: as hex, as text with every byte that
// is not printable text escaped, as JSON when it is a document, and decoded with its writer
// schema (Avro, Protobuf, JSON Schema) when it is framed for one.
type bytesView struct {
	// Null is true for a null key or header value (as opposed to an empty one).
	Null bool
	Size int
	// Shown is how many bytes the hex and text views show; Cut is true when it is below Size.
	Shown int
	Cut   bool
	// Hex is the hex dump, one hexLine a line, as text.
	Hex  string
	Text []textSeg
	// TextShown is how many bytes the text view shows when it stops early (a value that is
	// mostly not text breaks into too many escapes to be worth reading); 0 when it shows Shown.
	TextShown int
	// JSON is the value pretty-printed when it is a JSON document; JSONNote says why not.
	JSON     []textSeg
	JSONNote string
	// Decoded is the value decoded with its writer schema, as JSON; DecodedNote says how (the
	// format, framing and schema) or why not.
	Decoded     []textSeg
	DecodedNote string
	// Validation is a JSON Schema value's validation result: nil for other formats.
	Validation *validationView
}

// validationView is the result of validating a JSON Schema value, shown as it is (a value
// need not validate to be shown).
type validationView struct {
	Valid  bool
	Errors []string
}

// hexLine is one line of a hex dump: the offset, 16 bytes in hex and their printable form.
type hexLine struct {
	Offset string
	Hex    string
	ASCII  string
}

// textSeg is a run of text: either literal (valid, printable UTF-8) or an escape standing for
// bytes that are not (Esc), such as \x00, \xff or \u202e.
type textSeg struct {
	S   string
	Esc bool
}

// maxJSONView bounds the size of a value pretty-printed as JSON.
const maxJSONView = 1 << 20

// newBytesView returns the hex and text views of b, cut at max bytes; null marks a null value.
func newBytesView(b []byte, null bool, max int) bytesView {
	v := bytesView{Null: null, Size: len(b)}
	shown := b
	if len(shown) > max {
		shown, v.Cut = shown[:max], true
	}
	v.Shown = len(shown)
	v.Hex = hexText(hexDump(shown))
	v.Text, v.TextShown = textView(shown), 0
	if len(v.Text) > maxTextSegs {
		v.Text, v.TextShown = v.Text[:maxTextSegs], 0
		for _, s := range v.Text {
			v.TextShown += s.bytes()
		}
	}
	return v
}

// maxTextSegs bounds the runs of a text view: a value of random bytes alternates between text
// and escapes every few bytes.
const maxTextSegs = 2000

// bytes returns how many bytes of the value the segment stands for.
func (s textSeg) bytes() int {
	if !s.Esc {
		return len(s.S)
	}
	n := 0
	for i := 0; i < len(s.S); i++ {
		if s.S[i] != '\\' {
			continue
		}
		switch s.S[i+1] {
		case 'x':
			n++ // \xNN is one byte
		case 'u':
			r, _ := strconv.ParseUint(s.S[i+2:i+6], 16, 32)
			n += utf8.RuneLen(rune(r)) // \uNNNN is one code point
		case 'U':
			r, _ := strconv.ParseUint(s.S[i+2:i+10], 16, 32)
			n += utf8.RuneLen(rune(r)) // \UNNNNNNNN is one code point
		}
	}
	return n
}

// addJSON fills the JSON view of b.
func (v *bytesView) addJSON(b []byte) {
	switch {
	case len(b) == 0:
		v.JSONNote = "The value is empty."
	case len(b) > maxJSONView:
		v.JSONNote = fmt.Sprintf("The value is larger than %s; download it to read it as JSON.", byteSize(maxJSONView))
	case !utf8.Valid(b):
		v.JSONNote = "The value is not UTF-8 text, so it is not JSON."
	case !json.Valid(b):
		v.JSONNote = "The value is not a JSON document."
	default:
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			v.JSONNote = "The value is not a JSON document."
			return
		}
		v.JSON = textView(out.Bytes())
	}
}

// addDecoded fills the decoded view from the operator core's decoding of the value: the
// JSON, or the decoder's reason why there is none.
func (v *bytesView) addDecoded(d *payload.Decoded, err error) {
	var pe *avro.PayloadError
	switch {
	case errors.As(err, &pe):
		v.DecodedNote = sentence(pe.Error())
	case err != nil:
		v.DecodedNote = "The value could not be decoded with a schema."
	case d.Format == payload.FormatJSON:
		v.DecodedNote = "The value is plain JSON, framed for no schema: the JSON view shows it."
	default:
		var pretty bytes.Buffer
		if json.Indent(&pretty, d.JSON, "", "  ") != nil {
			pretty.Reset()
			pretty.Write(d.JSON)
		}
		v.Decoded, v.DecodedNote = textView(pretty.Bytes()), "Decoded from "+d.Describe()+"."
		if d.Note != "" {
			v.DecodedNote += " " + sentence(d.Note)
		}
		if d.Validation != nil {
			v.Validation = &validationView{Valid: d.Validation.Valid, Errors: d.Validation.Errors}
		}
	}
}

// sentence capitalizes s and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// hexDump renders b 16 bytes a line: offset, hex (a gap after 8 bytes), and the bytes 0x20 to
// 0x7e as themselves, every other byte as '.'.
func hexDump(b []byte) []hexLine {
	const digits = "0123456789abcdef"
	lines := make([]hexLine, 0, (len(b)+15)/16)
	for off := 0; off < len(b); off += 16 {
		row := b[off:min(off+16, len(b))]
		var hx, asc strings.Builder
		hx.Grow(49)
		asc.Grow(16)
		for i := range 16 {
			if i == 8 {
				hx.WriteByte(' ')
			}
			if i < len(row) {
				hx.WriteByte(digits[row[i]>>4])
				hx.WriteByte(digits[row[i]&0xf])
			} else {
				hx.WriteString("  ")
			}
			if i < 15 {
				hx.WriteByte(' ')
			}
			if i < len(row) {
				if c := row[i]; c >= 0x20 && c <= 0x7e {
					asc.WriteByte(c)
				} else {
					asc.WriteByte('.')
				}
			}
		}
		lines = append(lines, hexLine{Offset: fmt.Sprintf("%08x", off), Hex: hx.String(), ASCII: asc.String()})
	}
	return lines
}

// hexText joins hex lines as a dump reads: "00000000  48 65 ...  |He...|".
func hexText(lines []hexLine) string {
	var b strings.Builder
	b.Grow(len(lines) * 78)
	for _, l := range lines {
		b.WriteString(l.Offset)
		b.WriteString("  ")
		b.WriteString(l.Hex)
		b.WriteString("  |")
		b.WriteString(l.ASCII)
		b.WriteString("|\n")
	}
	return b.String()
}

// textView renders b as text: valid printable UTF-8 as itself (with newlines and tabs), a byte
// that is not valid UTF-8 or is a control character as \xNN, and a code point that would hide
// or reorder text (see hiddenRune) as \uNNNN, or \UNNNNNNNN beyond the first plane.
func textView(b []byte) []textSeg {
	const digits = "0123456789abcdef"
	var segs []textSeg
	var run strings.Builder // the current run, literal or escaped
	esc := false
	flush := func() {
		if run.Len() > 0 {
			segs = append(segs, textSeg{S: run.String(), Esc: esc})
			run.Reset()
		}
	}
	mode := func(e bool) {
		if e != esc {
			flush()
			esc = e
		}
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1, r < 0x20 && r != '\n' && r != '\t', r == 0x7f:
			mode(true)
			run.WriteString(`\x`)
			run.WriteByte(digits[b[i]>>4])
			run.WriteByte(digits[b[i]&0xf])
		case hiddenRune(r) && r > 0xffff:
			mode(true)
			fmt.Fprintf(&run, `\U%08x`, r)
		case hiddenRune(r):
			mode(true)
			fmt.Fprintf(&run, `\u%04x`, r)
		default:
			mode(false)
			run.Write(b[i : i+size])
		}
		i += size
	}
	flush()
	return segs
}

// headerView is one header of the failed record.
type headerView struct {
	Index int
	Name  []textSeg
	Value bytesView
}
