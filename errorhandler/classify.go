package errorhandler

import (
	"fmt"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/errchain"
)

// Phase names the step in which a record failed.
type Phase string

// The two phases of handling a record.
const (
	// PhaseDecode is the decoding of the record's key or value.
	PhaseDecode Phase = "decode"
	// PhaseProcess is the user's handler (an error or a panic).
	PhaseProcess Phase = "process"
)

// CodePanic is the error code of a handler that panicked.
const CodePanic = "PANIC"

// Classification is the error code and temporality written into an MPFE's errorType reference.
type Classification struct {
	// Code is the error code, e.g. "DESERIALIZATION_FAILED".
	Code string
	// Temporality says whether a retry may help.
	Temporality avro.Temporality
}

// Classified is implemented by errors that carry their own classification. It is found with
// errors.As anywhere in an error's chain, so wrapping with fmt.Errorf("...: %w", err) keeps it.
type Classified interface {
	error
	// ErrorCode returns the error code written into the MPFE.
	ErrorCode() string
	// Temporality returns TEMPORARY, PERMANENT or UNKNOWN.
	Temporality() avro.Temporality
}

// classifiedError is the Classified error built by Temporary, Permanent and Classify.
type classifiedError struct {
	err  error
	code string
	temp avro.Temporality
}

func (e *classifiedError) Error() string                 { return e.err.Error() }
func (e *classifiedError) Unwrap() error                 { return e.err }
func (e *classifiedError) ErrorCode() string             { return e.code }
func (e *classifiedError) Temporality() avro.Temporality { return e.temp }

// Temporary marks err as a temporary failure with the given code: the redrive service retries
// such failures. It returns nil when err is nil.
func Temporary(err error, code string) error { return Classify(err, code, avro.Temporary) }

// Permanent marks err as a permanent failure with the given code: retrying cannot help.
// It returns nil when err is nil.
func Permanent(err error, code string) error { return Classify(err, code, avro.Permanent) }

// Classify attaches a code and a temporality to err. It returns nil when err is nil.
// The returned error unwraps to err.
func Classify(err error, code string, t avro.Temporality) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, code: code, temp: t}
}

// ClassificationOf returns the classification carried by the first Classified error in err's
// chain, and whether there was one.
func ClassificationOf(err error) (Classification, bool) {
	c, ok := errchain.As[Classified](err)
	if !ok {
		return Classification{}, false
	}
	return Classification{Code: c.ErrorCode(), Temporality: c.Temporality()}, true
}

// DefaultClassification returns the classification redrive gives a failure when no Classifier
// overrides it: a Classified error in the chain wins; otherwise a decode failure is
// DESERIALIZATION_FAILED/PERMANENT, a panic PANIC/UNKNOWN, and any other handler error
// UNKNOWN_EXCEPTION/UNKNOWN. An empty code or an invalid temporality of a Classified error is
// replaced by the phase's default.
func DefaultClassification(phase Phase, err error) Classification {
	def := Classification{Code: avro.CodeUnknownException, Temporality: avro.Unknown}
	switch {
	case phase == PhaseDecode:
		def = Classification{Code: avro.CodeDeserializationFailed, Temporality: avro.Permanent}
	case isPanic(err):
		def = Classification{Code: CodePanic, Temporality: avro.Unknown}
	}
	c, ok := ClassificationOf(err)
	if !ok {
		return def
	}
	return c.orDefault(def)
}

func isPanic(err error) bool {
	_, ok := errchain.As[*PanicError](err)
	return ok
}

// orDefault fills an empty code or an invalid temporality from def.
func (c Classification) orDefault(def Classification) Classification {
	if c.Code == "" {
		c.Code = def.Code
	}
	if !c.Temporality.Valid() {
		c.Temporality = def.Temporality
	}
	return c
}

// ClassifyWith returns the classification of a failure: DefaultClassification, overridden by
// cl when it is not nil (an empty code or an invalid temporality of its result falls back to
// the default's). It is the one classification every adapter and policy uses.
func ClassifyWith(cl Classifier, phase Phase, err error) Classification {
	def := DefaultClassification(phase, err)
	if cl == nil {
		return def
	}
	return cl(phase, err, def).orDefault(def)
}

// Classifier decides the classification of a failure. It receives the phase, the error and the
// default classification (see DefaultClassification) and returns the one to use; an empty code
// or an invalid temporality in its result falls back to the default's.
type Classifier func(phase Phase, err error, def Classification) Classification

// PanicError is the error of a handler that panicked. It keeps the panicking goroutine's stack.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the goroutine's stack as runtime/debug.Stack formats it.
	Stack []byte
	// Site is the function and line that panicked ("pkg.Func:42"), used to group failures.
	Site string
}

// Error returns "panic: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}
