// Package clip shortens text that a client sent before it is quoted back in an error message,
// so that a message stays short whatever the client sent.
package clip

import "unicode/utf8"

// Default is the length, in bytes, that error messages clip client-given values to.
const Default = 40

// Text returns s when it is at most n bytes long, else its longest prefix of at most n
// bytes that ends on a rune boundary, followed by "…". Invalid UTF-8 is kept as it is: quote
// the result with %q.
func Text(s string, n int) string {
	n = max(n, 0)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
