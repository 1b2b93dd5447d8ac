// Package telemetry sets up the OpenTelemetry tracing of the redrive service from the standard
// OTEL_* environment variables: an OTLP exporter (HTTP/protobuf or gRPC), a batch span
// processor, a sampler and the service's resource. Tracing is off unless OTEL_TRACES_EXPORTER
// names an exporter; off, New returns a Tracing whose TracerProvider is nil, and the
// components it is given to emit no spans and add no headers.
//
// The exporter reads its own variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_INSECURE,
// OTEL_EXPORTER_OTLP_TIMEOUT, ...), and the batch span processor its OTEL_BSP_* ones, as the
// OpenTelemetry specification describes them.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// The environment variables New reads itself.
const (
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvExporter       = "OTEL_TRACES_EXPORTER"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// DefaultServiceName is the service.name of the spans when OTEL_SERVICE_NAME (and the
// service.name of OTEL_RESOURCE_ATTRIBUTES) is not set.
const DefaultServiceName = "redrive"

// Config configures New. A zero field means the documented default.
type Config struct {
	// Getenv reads the environment. Defaults to os.Getenv. The exporter and the batch span
	// processor read their own variables from the process environment.
	Getenv func(string) string
	// Console receives the spans of the "console" exporter. Defaults to os.Stdout.
	Console io.Writer
	// Version is the service.version of the spans. Optional.
	Version string
}

// Tracing is the service's tracing: a TracerProvider when it is on, nothing when it is off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	exporter string
}

// New sets tracing up from the environment (see the package documentation). It returns an
// error naming the variable whose value it cannot use.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if cfg.Console == nil {
		cfg.Console = os.Stdout
	}
	if v := strings.TrimSpace(getenv(EnvSDKDisabled)); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", EnvSDKDisabled, v)
		}
		if disabled {
			return &Tracing{}, nil
		}
	}
	names, err := exporterNames(getenv(EnvExporter))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return &Tracing{}, nil
	}
	sampler, err := samplerFrom(getenv(EnvSampler), getenv(EnvSamplerArg))
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, getenv(EnvServiceName), cfg.Version)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(sampler), sdktrace.WithResource(res)}
	for _, name := range names {
		exp, err := newExporter(ctx, name, getenv, cfg.Console)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	return &Tracing{provider: sdktrace.NewTracerProvider(opts...), exporter: strings.Join(names, ",")}, nil
}

// NewWithExporter returns a Tracing that samples every span and exports it to exp through a
// batch span processor: for tests and benchmarks.
func NewWithExporter(exp sdktrace.SpanExporter) *Tracing {
	return &Tracing{
		provider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp)),
		exporter: "custom",
	}
}

// Enabled reports whether tracing is on.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Exporter names the exporters in use ("otlp", "console", ...); empty when tracing is off.
func (t *Tracing) Exporter() string {
	if t == nil {
		return ""
	}
	return t.exporter
}

// TracerProvider returns the provider to give the components, or nil when tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if !t.Enabled() {
		return nil
	}
	return t.provider
}

// Shutdown exports the spans still buffered and stops the exporters, within ctx.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}

// ShutdownTimeout bounds the flush of Shutdown when the caller has no deadline of its own.
const ShutdownTimeout = 10 * time.Second

// exporterNames parses OTEL_TRACES_EXPORTER: a comma-separated list of otlp, console and none.
func exporterNames(v string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
		switch n {
		case "":
			continue
		case "none":
			seen[n] = true
			continue
		case "otlp", "console":
		default:
			return nil, fmt.Errorf("%s=%q: unknown exporter %q (want otlp, console or none)", EnvExporter, v, n)
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if seen["none"] {
		return nil, nil
	}
	return names, nil
}

func newExporter(ctx context.Context, name string, getenv func(string) string, console io.Writer) (sdktrace.SpanExporter, error) {
	if name == "console" {
		return stdouttrace.New(stdouttrace.WithWriter(console))
	}
	variable, protocol := EnvTracesProtocol, strings.TrimSpace(getenv(EnvTracesProtocol))
	if protocol == "" {
		variable, protocol = EnvProtocol, strings.TrimSpace(getenv(EnvProtocol))
	}
	switch protocol {
	case "", "http/protobuf":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP exporter (http/protobuf): %w", err)
		}
		return exp, nil
	case "grpc":
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP exporter (grpc): %w", err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("%s=%q: unknown protocol (want http/protobuf or grpc)", variable, protocol)
}

// samplerFrom parses OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. The default is
// parentbased_always_on.
func samplerFrom(name, arg string) (sdktrace.Sampler, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	arg = strings.TrimSpace(arg)
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("%s=%q: want a ratio from 0 to 1", EnvSamplerArg, arg)
		}
		return sdktrace.TraceIDRatioBased(r), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return ratio()
	case "parentbased_traceidratio":
		s, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(s), nil
	}
	return nil, fmt.Errorf("%s=%q: unknown sampler (want always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off or parentbased_traceidratio)", EnvSampler, name)
}

// newResource describes the service: service.name (OTEL_SERVICE_NAME, else the service.name of
// OTEL_RESOURCE_ATTRIBUTES, else DefaultServiceName), service.version, the SDK, the host and
// the process.
func newResource(ctx context.Context, serviceName, version string) (*resource.Resource, error) {
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(DefaultServiceName))}
	if version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(version)))
	}
	attrs = append(attrs, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if serviceName = strings.TrimSpace(serviceName); serviceName != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceName(serviceName)))
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return res, nil
}
