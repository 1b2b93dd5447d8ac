package engine

import (
	"context"
	"errors"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/internal/errchain"
)

// Delivery reports the outcome of one published MPFE.
type Delivery struct {
	done    chan struct{}
	err     error
	eventID string
	stop    func() bool // stops the context watch
	job     Job
}

// Done is closed when the outcome is known.
func (d *Delivery) Done() <-chan struct{} { return d.done }

// Err returns nil when the error topic acknowledged the MPFE, so the record's offset may be
// committed; otherwise why it was not (the context ended, or the DeadLetterer closed), joined
// with the last produce error. Call it after Done is closed.
func (d *Delivery) Err() error {
	select {
	case <-d.done:
		return d.err
	default:
		return errors.New("dead-letter delivery still in flight")
	}
}

// Wait waits for the outcome or for ctx to end.
func (d *Delivery) Wait(ctx context.Context) error {
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// EventID returns the MPFE's identity.eventId.
func (d *Delivery) EventID() string { return d.eventID }

// IdempotenceID returns the MPFE's identity.idempotenceId (see errorhandler.IdempotenceID).
func (d *Delivery) IdempotenceID() string { return d.job.ev.Identity.IdempotenceID }

// Publish publishes the MPFE of msg's failure err. The phase is PhaseDecode when err's chain
// holds a *errorhandler.DecodeError, else PhaseProcess. Failed attempts are retried until the
// error topic acknowledges the event or ctx ends; only a Delivery whose Err is nil allows
// committing msg's offset. msg's bytes must not be modified until the Delivery is done.
func (d *DeadLetterer) Publish(ctx context.Context, msg *errorhandler.Message, err error) *Delivery {
	phase := errorhandler.PhaseProcess
	if _, ok := errchain.As[*errorhandler.DecodeError](err); ok {
		phase = errorhandler.PhaseDecode
	}
	del := &Delivery{done: make(chan struct{})}
	j := &del.job
	d.initJob(j, msg, classifyFailure(d.cfg.Classifier, phase, err), 0, del)
	del.eventID = j.ev.Identity.EventID
	del.stop = context.AfterFunc(ctx, func() { d.cancel(j, ctx.Err()) })
	d.submit(j)
	return del
}

func (del *Delivery) jobDone(_ *Job, err error) {
	if del.stop != nil {
		del.stop()
	}
	del.err = err
	close(del.done)
}

func (del *Delivery) jobFailing(*Job, error) {}
