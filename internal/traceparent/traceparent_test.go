package traceparent

import (
	"bytes"
	"testing"
)

func TestParseFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		valid bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"", false},
		{"garbage", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
	} {
		sc, ok := Parse([]byte(tc.in))
		if ok != tc.valid {
			t.Errorf("Parse(%q) valid = %v, want %v", tc.in, ok, tc.valid)
			continue
		}
		if !ok {
			if _, ok := Link([]byte(tc.in)); ok {
				t.Errorf("Link(%q) valid", tc.in)
			}
			if Format(sc) != nil {
				t.Errorf("Format of an invalid context is not nil")
			}
			continue
		}
		if !sc.IsRemote() {
			t.Errorf("Parse(%q) is not remote", tc.in)
		}
		if got := string(Format(sc)); got != tc.in {
			t.Errorf("Format(Parse(%q)) = %q", tc.in, got)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	f.Add([]byte("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"))
	f.Add([]byte{})
	f.Add([]byte("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"))
	f.Add([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, ok := Parse(b)
		ref, refOK := extract(b)
		if ok != refOK || (ok && !sc.Equal(ref)) {
			t.Fatalf("Parse(%q) = %v %v, the propagator says %v %v", b, sc, ok, ref, refOK)
		}
		if !ok {
			return
		}
		out := Format(sc)
		sc2, ok := Parse(out)
		if !ok || sc2.TraceID() != sc.TraceID() || sc2.SpanID() != sc.SpanID() || sc2.IsSampled() != sc.IsSampled() {
			t.Fatalf("round trip of %q through %q", b, out)
		}
		if bytes.Equal(out, b) {
			return
		}
	})
}
