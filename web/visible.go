package web

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// visible returns stored text as the pages show it: every code point that a reader would not
// see, or that changes how the text around it is displayed (bidirectional overrides and
// isolates, zero-width characters, other formatting characters, C0 and C1 controls except
// newline and tab), written as ⟨U+XXXX⟩, and every byte that is not UTF-8 as ⟨0xNN⟩. An error
// code, a topic or an audit principal can then not pass itself off as another, nor reorder
// the text around it. The pages apply it, as the template function "visible", to everything
// stored that they show outside the payload views (which escape their own way, see textView);
// html/template still escapes the result. v is a string, a *string (nil is ""), a []byte or a
// value of another type, printed with fmt.
func visible(v any) string {
	var s string
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		s = t
	case *string:
		if t == nil {
			return ""
		}
		s = *t
	case []byte:
		s = string(t)
	default:
		rv := reflect.ValueOf(v)
		for rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return ""
			}
			rv = rv.Elem()
		}
		if rv.Kind() == reflect.String {
			s = rv.String()
		} else {
			s = fmt.Sprint(rv.Interface())
		}
	}
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, "⟨0x%02X⟩", s[i])
		case invisible(r):
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// plain reports whether s is valid UTF-8 without a code point that visible rewrites.
func plain(s string) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if invisible(rune(c)) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || invisible(r) {
			return false
		}
		i += size
	}
	return true
}

// invisible reports whether visible writes r as ⟨U+XXXX⟩: a control character other than
// newline and tab, or a hiddenRune.
func invisible(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || hiddenRune(r)
}

// hiddenRune reports whether r is a code point that a reader would not see, or that changes
// how the text around it is displayed: C1 controls, formatting characters (Unicode category
// Cf: bidirectional embeddings, overrides, isolates and marks, zero-width spaces and joiners,
// the byte order mark, invisible operators, tags), line and paragraph separators, and the
// fillers that render as blanks.
func hiddenRune(r rune) bool {
	switch {
	case r >= 0x80 && r < 0xa0: // C1 controls
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	case r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0: // Hangul fillers
		return true
	case r == 0x034f, r == 0x180e: // combining grapheme joiner, Mongolian vowel separator
		return true
	}
	return r >= 0xa0 && unicode.Is(unicode.Cf, r)
}
