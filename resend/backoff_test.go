package resend

import (
	"testing"
	"time"
)

func TestBackoffNext(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mid := func() float64 { return 0.5 } // no jitter: spread 0
	low := func() float64 { return 0 }   // -10 %
	high := func() float64 { return 0.999999 }
	tests := []struct {
		name    string
		policy  Backoff
		attempt int
		want    time.Duration
		ok      bool
	}{
		{"attempt 0", Backoff{Rand: mid}, 0, 30 * time.Second, true},
		{"attempt 1", Backoff{Rand: mid}, 1, 60 * time.Second, true},
		{"attempt 2", Backoff{Rand: mid}, 2, 120 * time.Second, true},
		{"attempt 5", Backoff{Rand: mid}, 5, 16 * time.Minute, true},
		{"capped at 24h", Backoff{Rand: mid}, 14, 24 * time.Hour, true},
		{"exhausted at 15", Backoff{Rand: mid}, 15, 0, false},
		{"past exhausted", Backoff{Rand: mid}, 99, 0, false},
		{"jitter low", Backoff{Rand: low}, 1, 54 * time.Second, true},
		{"jitter high stays in 10%", Backoff{Rand: high}, 1, 66*time.Second - 60*time.Microsecond, true},
		{"jitter never exceeds cap", Backoff{Rand: high}, 14, 24 * time.Hour, true},
		{"no jitter", Backoff{Jitter: -1, Rand: high}, 1, 60 * time.Second, true},
		{"custom", Backoff{Base: time.Second, Factor: 3, Max: time.Minute, MaxAttempts: 3, Rand: mid}, 2, 9 * time.Second, true},
		{"custom cap", Backoff{Base: time.Second, Factor: 3, Max: 20 * time.Second, MaxAttempts: 9, Rand: mid}, 4, 20 * time.Second, true},
		{"custom exhausted", Backoff{Base: time.Second, MaxAttempts: 3, Rand: mid}, 3, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.policy.Next(tt.attempt, now)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if d := got.Sub(now); d.Round(time.Millisecond) != tt.want.Round(time.Millisecond) {
				t.Fatalf("delay = %s, want %s", d, tt.want)
			}
		})
	}
}

func TestBackoffValidate(t *testing.T) {
	if err := DefaultBackoff().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []Backoff{{Base: -1}, {Factor: 0.5}, {Base: time.Hour, Max: time.Minute}, {Jitter: 2}, {MaxAttempts: -1}} {
		if err := b.Validate(); err == nil {
			t.Errorf("%+v: want an error", b)
		}
	}
}

// Applying the defaults twice keeps a policy as it was: jitter stays off.
func TestBackoffDefaultsIdempotent(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := Backoff{Jitter: -1, Rand: func() float64 { return 0 }}.withDefaults().withDefaults()
	if got, _ := b.Next(1, now); got.Sub(now) != time.Minute {
		t.Fatalf("delay %s, want 1m without jitter", got.Sub(now))
	}
	if !b.Exhausted(15) || b.Exhausted(14) {
		t.Fatal("Exhausted disagrees with MaxAttempts 15")
	}
}
