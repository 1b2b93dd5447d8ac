package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// Tracing is off without OTEL_TRACES_EXPORTER, on with it, and a bad value stops the service
// with the variable's name. Not parallel: it sets environment variables (and, on, the global
// TracerProvider, here with a sampler that records nothing).
func TestServeTracingFromEnvironment(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &service{log: quiet}
	if err := s.startTracing(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.tracerProvider() != nil {
		t.Fatal("tracing on without OTEL_TRACES_EXPORTER")
	}
	s.stopTracing()

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if err := (&service{log: quiet}).startTracing(context.Background()); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("bad exporter: %v", err)
	}

	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	s = &service{log: quiet}
	if err := s.startTracing(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.tracerProvider() == nil {
		t.Fatal("tracing off with OTEL_TRACES_EXPORTER=otlp")
	}
	s.stopTracing()
}
