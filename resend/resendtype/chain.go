package resendtype

import (
	"github.com/google/uuid"
	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
)

// ChainPlan is what a resend (or a close with release) of one failure of an ordering guard's
// chain sends after it.
type ChainPlan struct {
	// Follow are the open parked failures to resend after the failure, one at a time in
	// offset order, each after the broker acknowledged the one before.
	Follow []redrive.ParkedLink
	// Release is the head's causing message when the resends carry avro.HeaderRelease.
	Release string
	// Own says that the acted-on failure's own resend carries the release too (a parked
	// failure resent behind a closed head).
	Own bool
}

// Headers returns the headers added to the acted-on failure's own resend.
func (p ChainPlan) Headers() []avro.Header {
	if !p.Own || p.Release == "" {
		return nil
	}
	return []avro.Header{{Name: avro.HeaderRelease, Value: []byte(p.Release)}}
}

// FollowHeaders returns the headers added to the resends of p.Follow.
func (p ChainPlan) FollowHeaders() []avro.Header {
	if p.Release == "" {
		return nil
	}
	return []avro.Header{{Name: avro.HeaderRelease, Value: []byte(p.Release)}}
}

// PlanChain returns what follows an action on the failure with id, given its chain ch (read
// before the action):
//
//   - a resend of a head: its open parked failures, after it;
//   - a close with release of a head: its open parked failures, each carrying the release;
//   - a resend of a parked failure whose head is CLOSED (records parked after the head was
//     closed, or a release that did not get through): the failure itself and the open parked
//     failures after it carry the release, so that the consumer's guard lets the key go on.
//
// Anything else sends nothing more. The operator's retry and close and the scheduler's
// automatic resends plan with it alike.
func PlanChain(ch redrive.ParkedChain, id uuid.UUID, release bool) ChainPlan {
	if ch.Head == nil {
		return ChainPlan{}
	}
	var p ChainPlan
	switch {
	case ch.Head.ID == id:
		p.Follow = ch.Open()
		if release {
			p.Release = ch.Head.CausingMessage
		}
		return p
	case !release && ch.Head.State == redrive.StateClosed:
		p.Release, p.Own = ch.Head.CausingMessage, true
		after := false
		for _, l := range ch.Open() {
			if after {
				p.Follow = append(p.Follow, l)
			}
			after = after || l.ID == id
		}
		return p
	}
	return ChainPlan{}
}
