package resend

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redrive/redrive"
)

// Backoff is the retry policy of temporary failures: a pure function of the attempt number and
// the current time (plus a jitter source), with a cap and a maximum number of attempts.
type Backoff struct {
	// Base is the delay before the first resend. Defaults to 30s.
	Base time.Duration
	// Factor multiplies the delay per attempt. Defaults to 2.
	Factor float64
	// Max caps the delay. Defaults to 24h.
	Max time.Duration
	// Jitter is the relative spread applied to each delay, 0 to 1. Defaults to 0.1 (±10 %);
	// a negative value turns jitter off.
	Jitter float64
	// MaxAttempts is how many failures of one message are retried automatically; the failure
	// with this attempt number becomes PERMANENT with reason "retries exhausted". Defaults to 15.
	MaxAttempts int
	// Rand returns a float in [0, 1) for jitter. Defaults to math/rand/v2's Float64.
	Rand func() float64
}

// DefaultBackoff returns the default policy: 30 s × 2^attempt, capped at 24 h, ±10 % jitter,
// 15 attempts.
func DefaultBackoff() Backoff { return Backoff{}.withDefaults() }

func (b Backoff) withDefaults() Backoff {
	if b.Base == 0 {
		b.Base = 30 * time.Second
	}
	if b.Factor == 0 {
		b.Factor = 2
	}
	if b.Max == 0 {
		b.Max = 24 * time.Hour
	}
	if b.Jitter == 0 {
		b.Jitter = 0.1
	}
	// A negative Jitter stays negative (jitter off), so that applying the defaults twice
	// does not turn jitter back on.
	if b.MaxAttempts == 0 {
		b.MaxAttempts = 15
	}
	if b.Rand == nil {
		b.Rand = rand.Float64
	}
	return b
}

// Validate reports a configuration that cannot work, naming the field.
func (b Backoff) Validate() error {
	var errs []error
	if b.Base < 0 {
		errs = append(errs, fmt.Errorf("invalid config: backoff Base %s is negative", b.Base))
	}
	if b.Factor < 0 || (b.Factor > 0 && b.Factor < 1) {
		errs = append(errs, fmt.Errorf("invalid config: backoff Factor %g must be >= 1", b.Factor))
	}
	if b.Max < 0 || (b.Max > 0 && b.Base > b.Max) {
		errs = append(errs, fmt.Errorf("invalid config: backoff Max %s must be >= Base %s", b.Max, b.Base))
	}
	if b.Jitter > 1 {
		errs = append(errs, fmt.Errorf("invalid config: backoff Jitter %g must be <= 1", b.Jitter))
	}
	if b.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("invalid config: backoff MaxAttempts %d is negative", b.MaxAttempts))
	}
	return errors.Join(errs...)
}

// Delay returns the un-jittered delay after the failure with the given attempt number (1-based):
// Base × Factor^attempt, capped at Max. Attempt 1 waits Base × Factor (60 s by default), as
// in 30 s × 2^attempt.
func (b Backoff) Delay(attempt int) time.Duration {
	b = b.withDefaults()
	if attempt < 0 {
		attempt = 0
	}
	d := float64(b.Base)
	for i := 0; i < attempt; i++ {
		d *= b.Factor
		if d >= float64(b.Max) {
			return b.Max
		}
	}
	return time.Duration(d)
}

// Next returns when the failure with the given attempt number should be resent, and false when
// the attempts are exhausted (the failure becomes PERMANENT).
func (b Backoff) Next(attempt int, now time.Time) (time.Time, bool) {
	b = b.withDefaults()
	if attempt >= b.MaxAttempts {
		return time.Time{}, false
	}
	d := b.Delay(attempt)
	if b.Jitter > 0 {
		spread := (b.Rand()*2 - 1) * b.Jitter // in [-Jitter, +Jitter)
		d = time.Duration(float64(d) * (1 + spread))
		if d > b.Max {
			d = b.Max
		}
	}
	return now.Add(d), true
}

// ReasonRetriesExhausted is the state_reason of a temporary failure that became PERMANENT
// because its causing message failed as often as the policy allows (MaxAttempts); intake
// writes the same reason (redrive.StateReasonRetriesExhausted).
const ReasonRetriesExhausted = redrive.StateReasonRetriesExhausted

// Exhausted reports whether the failure with the given attempt number gets no automatic
// resend: it is PERMANENT with ReasonRetriesExhausted. It agrees with Next returning false.
func (b Backoff) Exhausted(attempt int) bool { return attempt >= b.withDefaults().MaxAttempts }
