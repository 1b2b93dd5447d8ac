package web

import (
	"net/url"
	"strings"
	"testing"
)

func TestPagerHistory(t *testing.T) {
	t.Parallel()
	base := url.Values{"topic": {"orders"}}
	// First page: no first or previous link; next carries no history.
	p := newPager("/failures", base, "", history{}, "c1")
	if p.First != "" || p.Prev != "" || p.Next != "/failures?cursor=c1&topic=orders" {
		t.Fatalf("first page = %+v", p)
	}
	// Second page: previous is the first page.
	p = newPager("/failures", base, "c1", parseHistory(""), "c2")
	if p.First != "/failures?topic=orders" || p.Prev != p.First || p.Next != "/failures?cursor=c2&prev=c1&topic=orders" {
		t.Fatalf("second page = %+v", p)
	}
	// Third page: previous goes back to c1 with the history before it.
	p = newPager("/failures", base, "c2", parseHistory("c1"), "")
	if p.Prev != "/failures?cursor=c1&topic=orders" || p.Next != "" {
		t.Fatalf("third page = %+v", p)
	}
	// A long walk keeps maxHistory cursors and then knows no page before the oldest kept.
	h := history{}
	cur := ""
	for i := range maxHistory + 5 {
		h = h.push(cur)
		cur = "c" + strings.Repeat("x", i%3) + string(rune('a'+i%26))
	}
	if len(h.cursors) != maxHistory || !h.truncated {
		t.Fatalf("history has %d cursors, truncated %v", len(h.cursors), h.truncated)
	}
	back := parseHistory(h.encode())
	if len(back.cursors) != maxHistory || !back.truncated {
		t.Fatalf("parsed history = %d, %v", len(back.cursors), back.truncated)
	}
	if p := newPager("/failures", nil, "cz", history{truncated: true}, ""); p.Prev != "" || p.First != "/failures" {
		t.Fatalf("after the oldest kept cursor = %+v", p)
	}
	// What is not a history is dropped as a whole.
	for _, s := range []string{"a..b", "a.b%", strings.Repeat("a", maxCursorLen+1), strings.Repeat("a.", maxHistory+1) + "a"} {
		if h := parseHistory(s); len(h.cursors) != 0 || !h.truncated {
			t.Errorf("parseHistory(%q) = %+v", s, h)
		}
	}
}
