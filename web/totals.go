package web

import (
	"strconv"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/operator"
)

// totalLabel says how many things a list holds: "1 failure", "1,234 failures", or "more than
// 10,000 failures" when the count stopped at operator.TotalCap; "" when n is nil.
func totalLabel(n *int64, more bool, noun string) string {
	switch {
	case n == nil:
		return ""
	case more:
		return "more than " + thousands(operator.TotalCap) + " " + noun + "s"
	case *n == 1:
		return "1 " + noun
	}
	return thousands(*n) + " " + noun + "s"
}

// thousands writes n with a comma between groups of three digits: 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// position writes a partition or offset, "unknown" for redrive.UnknownPosition (a source that
// does not tell it) and "" for a nil pointer.
func position(v any) string {
	var n int64
	switch t := v.(type) {
	case int32:
		n = int64(t)
	case int64:
		n = t
	case *int32:
		if t == nil {
			return ""
		}
		n = int64(*t)
	case *int64:
		if t == nil {
			return ""
		}
		n = *t
	default:
		return ""
	}
	if n == redrive.UnknownPosition {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}
