package telemetry

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestOffByDefault(t *testing.T) {
	t.Parallel()
	for _, m := range []map[string]string{
		{},
		{EnvExporter: "none"},
		{EnvExporter: "otlp,none"},
		{EnvExporter: "otlp", EnvSDKDisabled: "true"},
	} {
		tr, err := New(context.Background(), Config{Getenv: env(m)})
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if tr.Enabled() || tr.TracerProvider() != nil || tr.Exporter() != "" {
			t.Errorf("%v: tracing on", m)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvExporter: "zipkin"}, EnvExporter},
		{map[string]string{EnvExporter: "otlp", EnvProtocol: "thrift"}, EnvProtocol},
		{map[string]string{EnvExporter: "otlp", EnvTracesProtocol: "thrift"}, EnvTracesProtocol},
		{map[string]string{EnvExporter: "otlp", EnvSampler: "sometimes"}, EnvSampler},
		{map[string]string{EnvExporter: "otlp", EnvSampler: "traceidratio", EnvSamplerArg: "1.5"}, EnvSamplerArg},
		{map[string]string{EnvExporter: "otlp", EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "x"}, EnvSamplerArg},
		{map[string]string{EnvSDKDisabled: "maybe"}, EnvSDKDisabled},
	} {
		_, err := New(context.Background(), Config{Getenv: env(tc.env)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.want)
		}
	}
}

func TestConsoleExporterFlushesOnShutdown(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tr, err := New(context.Background(), Config{
		Getenv:  env(map[string]string{EnvExporter: "console", EnvServiceName: "redrive-test", EnvSampler: "always_on"}),
		Console: &out,
		Version: "v1.2.3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || tr.Exporter() != "console" {
		t.Fatalf("tracing not on: %q", tr.Exporter())
	}
	_, span := tr.TracerProvider().Tracer("test").Start(context.Background(), "flushed-span")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"flushed-span", "redrive-test", "v1.2.3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %q", want)
		}
	}
}

func TestOTLPExporters(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"", "http/protobuf", "grpc"} {
		tr, err := New(context.Background(), Config{Getenv: env(map[string]string{
			EnvExporter: "otlp", EnvProtocol: proto, EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "0.25",
		})})
		if err != nil {
			t.Fatalf("%q: %v", proto, err)
		}
		if !tr.Enabled() {
			t.Fatalf("%q: tracing off", proto)
		}
		// Nothing was recorded, so shutting down contacts no collector.
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		if err := tr.Shutdown(ctx); err != nil {
			t.Errorf("%q: shutdown: %v", proto, err)
		}
		cancel()
	}
}
