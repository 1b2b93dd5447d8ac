package api

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracing returns the middleware that traces every request with a server span (otelhttp)
// named by its method and route pattern ("GET /api/v1/failures/{id}"), never its path or
// query; a request that carries a W3C traceparent continues its trace. The span holds the
// standard HTTP attributes (method, route, status, path), no query string and no body. It
// passes requests through when tp is nil.
func tracing(tp trace.TracerProvider) func(http.Handler) http.Handler {
	if tp == nil {
		return func(next http.Handler) http.Handler { return next }
	}
	otel := otelhttp.NewMiddleware("redrive-api",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		// otelhttp names the span again after the handler when the request has a pattern,
		// which chi sets: by then the route context knows the route.
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return spanName(r) }),
	)
	return func(next http.Handler) http.Handler {
		return otel(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			route := routeLabel(r)
			span := trace.SpanFromContext(r.Context())
			span.SetName(spanName(r))
			if route != routeUnmatched {
				span.SetAttributes(semconv.HTTPRoute(route))
			}
		}))
	}
}

// spanName is the method and route pattern of r (routeUnmatched before or without a route).
func spanName(r *http.Request) string { return methodLabel(r.Method) + " " + routeLabel(r) }
