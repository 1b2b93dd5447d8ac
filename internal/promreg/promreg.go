// Package promreg registers Prometheus collectors so that two components of one process that
// register the same metrics on one registry share them instead of failing.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Set registers collectors on one registry and collects the errors.
type Set struct {
	reg  prometheus.Registerer
	errs []error
}

// New returns a Set that registers on reg.
func New(reg prometheus.Registerer) *Set { return &Set{reg: reg} }

// Register registers c on the set's registry and returns it, or returns the collector of the
// same type that the registry already holds under c's description. Any other failure is kept
// for Err, and c is returned.
func Register[C prometheus.Collector](s *Set, c C) C {
	err := s.reg.Register(c)
	if err == nil {
		return c
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing
		}
	}
	s.errs = append(s.errs, err)
	return c
}

// Err returns the failures of Register, joined; nil when there were none.
func (s *Set) Err() error { return errors.Join(s.errs...) }
