package errchain

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

type codeErr struct{ code string }

func (e *codeErr) Error() string { return "code " + e.code }

type coded interface {
	error
	Code() string
}

func (e *codeErr) Code() string { return e.code }

// asOther claims, through its As method, to be any *codeErr.
type asOther struct{}

func (asOther) Error() string { return "as other" }
func (asOther) As(target any) bool {
	if p, ok := target.(**codeErr); ok {
		*p = &codeErr{code: "from As"}
		return true
	}
	return false
}

// TestAsMatchesErrorsAs compares As with errors.As on chains of every shape.
func TestAsMatchesErrorsAs(t *testing.T) {
	first, second := &codeErr{"first"}, &codeErr{"second"}
	chains := map[string]error{
		"nil":              nil,
		"plain":            io.EOF,
		"itself":           first,
		"wrapped":          fmt.Errorf("a: %w", fmt.Errorf("b: %w", first)),
		"first of two":     fmt.Errorf("a: %w", errors.Join(io.EOF, first, second)),
		"depth first":      errors.Join(fmt.Errorf("x: %w", errors.Join(io.EOF, second)), first),
		"joined, none":     errors.Join(io.EOF, io.ErrUnexpectedEOF),
		"custom As":        fmt.Errorf("a: %w", asOther{}),
		"custom As after":  errors.Join(first, asOther{}),
		"custom As before": errors.Join(asOther{}, first),
		"multi %w":         fmt.Errorf("%w and %w", io.EOF, second),
	}
	for name, err := range chains {
		t.Run(name, func(t *testing.T) {
			var want *codeErr
			wantOK := errors.As(err, &want)
			got, ok := As[*codeErr](err)
			if ok != wantOK || got != want && (got == nil || want == nil || got.code != want.code) {
				t.Errorf("As[*codeErr] = %v, %v; errors.As = %v, %v", got, ok, want, wantOK)
			}
			var wantI coded
			wantIOK := errors.As(err, &wantI)
			gotI, okI := As[coded](err)
			if okI != wantIOK || (okI && gotI.Code() != wantI.Code()) {
				t.Errorf("As[coded] = %v, %v; errors.As = %v, %v", gotI, okI, wantI, wantIOK)
			}
		})
	}
}

func BenchmarkAs(b *testing.B) {
	err := fmt.Errorf("order 42: %w", fmt.Errorf("store: %w", io.EOF))
	b.Run("errchain", func(b *testing.B) {
		for range b.N {
			if _, ok := As[*codeErr](err); ok {
				b.Fatal("found")
			}
		}
	})
	b.Run("errors.As", func(b *testing.B) {
		for range b.N {
			var c *codeErr
			if errors.As(err, &c) {
				b.Fatal("found")
			}
		}
	})
}
