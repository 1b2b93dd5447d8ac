package uuidtext

import (
	"testing"

	"github.com/google/uuid"
)

func TestAppendMatchesString(t *testing.T) {
	for _, u := range []uuid.UUID{uuid.Nil, uuid.Max, uuid.New(), uuid.NewSHA1(uuid.NameSpaceURL, []byte("x"))} {
		if got := string(Append([]byte("id:"), u)); got != "id:"+u.String() {
			t.Errorf("Append(%v) = %q, want %q", u, got, "id:"+u.String())
		}
	}
	u := uuid.New()
	if n := testing.AllocsPerRun(100, func() {
		var buf [Len]byte
		_ = Append(buf[:0], u)
	}); n != 0 {
		t.Errorf("Append allocates %v times, want 0", n)
	}
}
