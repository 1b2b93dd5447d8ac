package promreg_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/promreg"
)

func counter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "promreg_test_total", Help: "A test counter."})
}

func TestRegisterSharesAndReportsConflicts(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := promreg.New(reg)
	a := promreg.Register(first, counter())
	b := promreg.Register(promreg.New(reg), counter())
	if a != b {
		t.Fatal("the second registration did not return the collector registered first")
	}
	if err := first.Err(); err != nil {
		t.Fatal(err)
	}
	// The same name with another help text is a conflict, not a collector to share.
	s := promreg.New(reg)
	promreg.Register(s, prometheus.NewCounter(prometheus.CounterOpts{Name: "promreg_test_total", Help: "Other."}))
	if s.Err() == nil {
		t.Fatal("a conflicting collector was accepted")
	}
}
