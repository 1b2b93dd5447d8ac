package resendtype

import (
	"context"
	"time"

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
		// The failure's place in the chain, whatever its state (read before or after its resend).
		after := false
		for _, l := range ch.Parked {
			if after && l.State.Resendable() {
				p.Follow = append(p.Follow, l)
			}
			after = after || l.ID == id
		}
		return p
	}
	return ChainPlan{}
}

// HeaderReleaseItem names, on a record resent as a follower of an ordering chain's head, the
// release it was sent for: "<release id>/<failure id>". A resender that finishes a release
// that another instance's end interrupted looks for it on the topic to learn which follower
// reached the broker, so that it never sends one twice.
const HeaderReleaseItem = "redrive-release-item"

// ChainRequest asks a resender to release the ordering chains of failures whose action
// succeeded: for each that heads a chain (store.ParkedChain), its open parked failures are
// resent one at a time in offset order, after it, each once the broker acknowledged the one
// before (PlanChain).
type ChainRequest struct {
	// Heads are the failures acted on successfully (resent and acknowledged, or closed), in
	// the order of the action.
	Heads []uuid.UUID
	// HeadsCreatedAt, when not nil, holds the created_at of each of Heads (ResendItem.CreatedAt):
	// the look-up of the heads' chains then reads each record in its own partition instead of
	// searching every partition by id.
	HeadsCreatedAt []time.Time
	// HeadsCausing, when not nil, holds the causing message of each of Heads
	// (ResendItem.CausingMessage): the look-up then reads no record at all.
	HeadsCausing []string
	// Release says the heads were closed with release: each follower carries
	// avro.HeaderRelease.
	Release bool
	// Request is who asks and why; its Details go to every follower's audit entry.
	Request ManualRequest
	// JobID, when set, names the retry job the heads were items of: each follower is recorded
	// as an item of the job too, with its outcome.
	JobID *uuid.UUID
	// Wait, when set, is called before each follower is sent (a job's rate limiter); an error
	// stops the chain there (the rest keep their state). When nil, the resender's manual rate
	// limit applies to manual requests.
	Wait func(ctx context.Context) error
}

// ChainFollowed is what became of the followers of one head.
type ChainFollowed struct {
	Head uuid.UUID
	// Items has one outcome per follower, in offset order. Followers after one that was not
	// resent are OutcomeFailed with an Error saying they were not attempted.
	Items []ItemResult
}

// NotAttemptedInOrder is the Error of a follower not sent because the one before it was not
// resent: sending it on would break the key's order.
const NotAttemptedInOrder = "not attempted: the parked failure before it was not resent, and order must be kept"
