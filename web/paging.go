package web

import (
	"net/url"
	"strings"
)

// paramPrev is the query parameter that keeps the cursors of the pages before the current
// one, oldest first, joined by dots (a cursor is base64url: it holds no dot). The first page
// has no cursor and is not listed; a leading "-" says that older cursors were dropped.
const paramPrev = "prev"

// maxHistory bounds the cursors kept in paramPrev, so that an address stays short (a cursor
// has 35 characters). Paging back further than that leads to the first page only.
const maxHistory = 40

// maxCursorLen bounds one cursor kept in the history; longer entries are not cursors.
const maxCursorLen = 64

// history is the parsed paramPrev: the cursors of the earlier pages, oldest first, and whether
// older ones were dropped.
type history struct {
	cursors   []string
	truncated bool
}

// parseHistory reads paramPrev. Anything that is not a list of cursor-shaped entries is
// dropped as a whole (the history is a convenience: the core validates each cursor on use).
func parseHistory(s string) history {
	if s == "" {
		return history{}
	}
	parts := strings.Split(s, ".")
	var h history
	if parts[0] == "-" {
		h.truncated, parts = true, parts[1:]
	}
	if len(parts) > maxHistory {
		return history{truncated: true}
	}
	for _, p := range parts {
		if !cursorShaped(p) {
			return history{truncated: true}
		}
	}
	h.cursors = parts
	return h
}

// cursorShaped reports whether s could be a cursor: 1 to maxCursorLen base64url characters.
func cursorShaped(s string) bool {
	if s == "" || len(s) > maxCursorLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// encode writes h as paramPrev's value; "" for an empty history.
func (h history) encode() string {
	parts := h.cursors
	if h.truncated {
		parts = append([]string{"-"}, parts...)
	}
	return strings.Join(parts, ".")
}

// push returns the history of the page after the one at cursor.
func (h history) push(cursor string) history {
	if cursor == "" { // the first page is not listed
		return h
	}
	out := history{cursors: append(append([]string(nil), h.cursors...), cursor), truncated: h.truncated}
	if len(out.cursors) > maxHistory {
		out.cursors, out.truncated = out.cursors[len(out.cursors)-maxHistory:], true
	}
	return out
}

// pager holds the links of a keyset-paged list: the first, previous and next page, each ""
// when there is none (or, for Prev, when it is no longer known).
type pager struct {
	First, Prev, Next string
}

// forwardPager returns the links of a list that keeps no history of its pages: the first page
// (when cursor is not the first's) and the next (when next is not empty).
func forwardPager(path, cursor, next string) pager {
	var p pager
	if cursor != "" {
		p.First = path
	}
	if next != "" {
		p.Next = path + "?" + url.Values{paramCursor: {next}}.Encode()
	}
	return p
}

// newPager returns the links of the page at cursor, with hist the cursors before it and next
// the cursor of the following page ("" on the last page). base holds the list's other query
// parameters (the filter), kept in every link.
func newPager(path string, base url.Values, cursor string, hist history, next string) pager {
	link := func(c string, h history) string {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		if c != "" {
			v.Set(paramCursor, c)
			if e := h.encode(); e != "" {
				v.Set(paramPrev, e)
			}
		}
		if q := v.Encode(); q != "" {
			return path + "?" + q
		}
		return path
	}
	var p pager
	if cursor != "" {
		p.First = link("", history{})
		switch n := len(hist.cursors); {
		case n > 0:
			p.Prev = link(hist.cursors[n-1], history{cursors: hist.cursors[:n-1], truncated: hist.truncated})
		case !hist.truncated: // the page before is the first
			p.Prev = p.First
		}
	}
	if next != "" {
		p.Next = link(next, hist.push(cursor))
	}
	return p
}
