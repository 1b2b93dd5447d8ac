package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/redrive/redrive/internal/telemetry"
)

// startTracing sets the service's tracing up from the OTEL_* environment variables
// (internal/telemetry; off unless OTEL_TRACES_EXPORTER names an exporter). When it is on, it
// is also OpenTelemetry's global TracerProvider, with the W3C propagator: the middleware of
// the embedded demo's consumer traces its dead-letters too.
func (s *service) startTracing(ctx context.Context) error {
	t, err := telemetry.New(ctx, telemetry.Config{Getenv: os.Getenv, Console: os.Stderr, Version: version})
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	s.tracing = t
	if t.Enabled() {
		otel.SetTracerProvider(t.TracerProvider())
		otel.SetTextMapPropagator(propagation.TraceContext{})
		s.log.Info("tracing on", "exporter", t.Exporter())
	}
	return nil
}

// tracerProvider is what the components trace with: nil when tracing is off.
func (s *service) tracerProvider() trace.TracerProvider { return s.tracing.TracerProvider() }

// stopTracing exports the spans still buffered, within telemetry.ShutdownTimeout.
func (s *service) stopTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), telemetry.ShutdownTimeout)
	defer cancel()
	if err := s.tracing.Shutdown(ctx); err != nil {
		s.log.Warn("tracing: spans not exported at shutdown", "error", err)
	}
}
