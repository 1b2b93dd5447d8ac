package web

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Whatever bytes are stored, visible returns valid UTF-8 without a code point it would rewrite,
// keeps plain text as it is, and never panics; the text view accounts for every byte.
func FuzzVisible(f *testing.F) {
	for _, seed := range []string{"", "plain", "line\n\ttab", "user\u202etxt.exe", "a\u200bb\ufeff", "\x00\x1b\x7f",
		"\u0085\u009b", "\u2066x\u2069", "tag\U000e0041", "bad\xff\xfe\xc3", "⟨U+202E⟩", "a\ufffdb", "\u2028\u2029"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		got := visible(s)
		if !utf8.ValidString(got) {
			t.Fatalf("visible(%q) = %q is not UTF-8", s, got)
		}
		for _, r := range got {
			if invisible(r) {
				t.Fatalf("visible(%q) = %q keeps U+%04X", s, got, r)
			}
		}
		if plain(s) != (got == s) {
			t.Fatalf("visible(%q) = %q, plain = %v", s, got, plain(s))
		}
		if utf8.ValidString(s) && !strings.Contains(s, "⟨") {
			hidden := 0
			for _, r := range s {
				if invisible(r) {
					hidden++
				}
			}
			if marks := strings.Count(got, "⟨"); marks != hidden {
				t.Fatalf("visible(%q) = %q marks %d code points, want %d", s, got, marks, hidden)
			}
		}
		n := 0
		for _, seg := range textView(b) {
			n += seg.bytes()
		}
		if n != len(b) {
			t.Fatalf("the text view of %q stands for %d bytes", b, n)
		}
	})
}
