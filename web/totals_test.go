package web

import (
	"testing"

	"github.com/redrive/redrive"
)

func TestTotalsAndPositions(t *testing.T) {
	t.Parallel()
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		n    *int64
		more bool
		want string
	}{
		{nil, false, ""}, {n(0), false, "0 failures"}, {n(1), false, "1 failure"}, {n(999), false, "999 failures"},
		{n(1234), false, "1,234 failures"}, {n(10000), false, "10,000 failures"}, {n(10000), true, "more than 10,000 failures"},
	} {
		if got := totalLabel(c.n, c.more, "failure"); got != c.want {
			t.Errorf("totalLabel(%v, %v) = %q, want %q", c.n, c.more, got, c.want)
		}
	}
	for v, want := range map[int64]string{0: "0", 12: "12", 123456: "123,456", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%d) = %q", v, got)
		}
	}
	p32, p64 := int32(3), int64(redrive.UnknownPosition)
	for _, c := range []struct {
		v    any
		want string
	}{
		{int32(redrive.UnknownPosition), "unknown"}, {int64(redrive.UnknownPosition), "unknown"}, {int32(0), "0"}, {int64(42), "42"},
		{&p32, "3"}, {&p64, "unknown"}, {(*int32)(nil), ""}, {"x", ""},
	} {
		if got := position(c.v); got != c.want {
			t.Errorf("position(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{map[string]any{"from": nil, "to": "OPS-1"}, "none → OPS-1"},
		{map[string]any{"from": "a", "to": nil}, "a → none"},
		{map[string]any{"view": "detail"}, "map[view:detail]"},
		{"text", "text"},
	} {
		if got := auditChange(c.v); got != c.want {
			t.Errorf("auditChange(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}
