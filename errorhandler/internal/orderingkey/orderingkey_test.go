package orderingkey

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, key := range [][]byte{{}, []byte("order-1"), {0, 0xff, 0}} {
		b := Encode("orders", 3, key)
		got, ok := Decode(b, "orders", 3)
		if !ok || got != string(key) {
			t.Errorf("Decode(Encode(%q)) = %q, %v", key, got, ok)
		}
		if _, ok := Decode(b, "orders", 4); ok {
			t.Errorf("%q matched another partition", key)
		}
		if _, ok := Decode(b, "order", 3); ok {
			t.Errorf("%q matched another topic", key)
		}
	}
	for _, b := range [][]byte{nil, {0}, {0, 9, 'a'}} {
		if _, ok := Decode(b, "a", 0); ok {
			t.Errorf("Decode(%v) accepted a short key", b)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode("orders", 1, []byte("k")))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Decode(b, "orders", 1)
	})
}
