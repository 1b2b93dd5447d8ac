package clip_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redrive/redrive/internal/clip"
)

func TestText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 40, ""},
		{"short", 40, "short"},
		{strings.Repeat("a", 40), 40, strings.Repeat("a", 40)},
		{strings.Repeat("a", 41), 40, strings.Repeat("a", 40) + "…"},
		{"aé", 2, "a…"},             // é is two bytes: the cut moves back to the rune start
		{"日本語", 4, "日…"},            // three-byte runes
		{"abc", 0, "…"},             // nothing fits
		{"abc", -1, "…"},            // a negative bound is 0
		{"a\xff\xfeb", 2, "a\xff…"}, // invalid UTF-8 is kept, cut on a byte
	} {
		if got := clip.Text(c.in, c.max); got != c.want {
			t.Errorf("Text(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func FuzzText(f *testing.F) {
	f.Add("日本語 text", 5)
	f.Add("a\xff", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 100
		got := clip.Text(s, n)
		if len(s) <= max(n, 0) {
			if got != s {
				t.Fatalf("Text(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		prefix, ok := strings.CutSuffix(got, "…")
		if !ok || !strings.HasPrefix(s, prefix) || len(prefix) > max(n, 0) {
			t.Fatalf("Text(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Text(%q, %d) = %q cuts a rune", s, n, got)
		}
	})
}
