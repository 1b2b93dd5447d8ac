package operator

import (
	"net/url"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
)

func TestCursorRoundTrip(t *testing.T) {
	p := redrive.Position{CreatedAt: time.Date(2024, 5, 1, 12, 0, 0, 123456000, time.UTC), ID: uuid.New()}
	for _, o := range []redrive.Order{redrive.NewestFirst, redrive.OldestFirst} {
		got, err := decodeFailureCursor(encodeFailureCursor(p, o), o)
		if err != nil || !got.CreatedAt.Equal(p.CreatedAt) || got.ID != p.ID {
			t.Errorf("order %d: round trip = %+v, %v", o, got, err)
		}
		if _, err := decodeFailureCursor(encodeFailureCursor(p, o), 1-o); err == nil {
			t.Errorf("order %d: a cursor of the other order was accepted", o)
		}
		if _, err := decodeGroupCursor(encodeFailureCursor(p, o)); err == nil {
			t.Error("a failure cursor was accepted as a group cursor")
		}
	}
	g := redrive.GroupPosition{LastSeen: p.CreatedAt, ID: 42}
	if got, err := decodeGroupCursor(encodeGroupCursor(g)); err != nil || *got != g {
		t.Errorf("group round trip = %+v, %v", got, err)
	}
}

// An audit cursor keeps the item of a batch's entry, and an audit cursor of the layout before
// batch entries (time and id) still reads.
func TestAuditCursorRoundTrip(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 123456000, time.UTC)
	for _, p := range []redrive.AuditPosition{{At: at, ID: 9}, {At: at, ID: 9, Seq: 1234}} {
		got, err := decodeAuditCursor(encodeAuditCursor(p))
		if err != nil || !got.At.Equal(p.At) || got.ID != p.ID || got.Seq != p.Seq {
			t.Errorf("round trip of %+v = %+v, %v", p, got, err)
		}
	}
	if _, err := decodeAuditCursor(encodeGroupCursor(redrive.GroupPosition{LastSeen: at, ID: 9})); err == nil {
		t.Error("a group cursor was accepted as an audit cursor")
	}
}

// An audit cursor from a client either decodes to a position it encodes back to, or is a 400.
func FuzzDecodeAuditCursor(f *testing.F) {
	f.Add(encodeAuditCursor(redrive.AuditPosition{At: time.Now(), ID: 7}))
	f.Add(encodeAuditCursor(redrive.AuditPosition{At: time.Now(), ID: 7, Seq: 3}))
	f.Add("")
	f.Add("AWk")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := decodeAuditCursor(s)
		if err != nil {
			if ie, ok := err.(*InputError); !ok || ie.Field != "cursor" {
				t.Fatalf("%q: error %v is not an input error on cursor", s, err)
			}
			return
		}
		if p.ID <= 0 || p.Seq < 0 || p.At.Year() < 1 || p.At.Year() > 9999 {
			t.Fatalf("%q decoded to %+v", s, p)
		}
		if again := encodeAuditCursor(*p); again != s {
			t.Fatalf("%q decoded and re-encoded to %q", s, again)
		}
	})
}

// A cursor from a client either decodes to a position within PostgreSQL's range or is a 400.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeFailureCursor(redrive.Position{CreatedAt: time.Now(), ID: uuid.New()}, redrive.NewestFirst))
	f.Add(encodeGroupCursor(redrive.GroupPosition{LastSeen: time.Now(), ID: 7}))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		for _, o := range []redrive.Order{redrive.NewestFirst, redrive.OldestFirst} {
			if p, err := decodeFailureCursor(s, o); err == nil {
				if y := p.CreatedAt.Year(); y < 1 || y > 9999 {
					t.Fatalf("%q decoded to year %d", s, y)
				}
				if again := encodeFailureCursor(*p, o); again != s {
					t.Fatalf("%q decoded and re-encoded to %q", s, again)
				}
			} else if ie, ok := err.(*InputError); !ok || ie.Unprocessable || ie.Field != "cursor" {
				t.Fatalf("%q: error %v is not an input error on cursor", s, err)
			}
		}
		if p, err := decodeGroupCursor(s); err == nil && (p.ID <= 0 || p.LastSeen.Year() < 1 || p.LastSeen.Year() > 9999) {
			t.Fatalf("%q decoded to %+v", s, p)
		}
	})
}

// Any query string either gives a valid filter or an *InputError naming a parameter.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"state=PERMANENT&topic=a", "key_base64=AAE=", "q=%25_", "created_from=2024-01-01T00:00:00Z",
		"group_id=12", "state=a,b,,c", "temporality=temporary&temporality=unknown", "x=1", "a;b", "key=a&key_base64=YQ=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		filter, err := ParseFilter(q)
		if err == nil {
			if verr := filter.Validate(); verr != nil {
				t.Fatalf("%q: filter passed but Validate says %v", raw, verr)
			}
			// What FilterValues writes reads back to the same filter.
			again, err := ParseFilter(FilterValues(filter))
			if err != nil || FilterValues(again).Encode() != FilterValues(filter).Encode() {
				t.Fatalf("%q: round trip %v: %v", raw, FilterValues(filter), err)
			}
			return
		}
		if ie, ok := err.(*InputError); !ok || ie.Field == "" {
			t.Fatalf("%q: unexpected error %T %v", raw, err, err)
		}
	})
}
