package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/internal/promreg"
)

// metrics are the API's Prometheus metrics.
type metrics struct {
	// requests counts responses by route pattern, method and status code.
	requests *prometheus.CounterVec
	// duration observes the handling time by route pattern and method.
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_api_requests_total",
			Help: "API responses by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "redrive_api_request_duration_seconds",
			Help:    "Time to handle an API request, by route pattern and method.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"route", "method"}),
	}
	if reg == nil {
		return m, nil
	}
	set := promreg.New(reg)
	m.requests = promreg.Register(set, m.requests)
	m.duration = promreg.Register(set, m.duration)
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("register api metrics: %w", err)
	}
	return m, nil
}

// statusRecorder remembers the status code a handler writes.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// middleware records every request by its route pattern (not its path, which holds ids). Every
// label has a bounded set of values, whatever clients send: the route is one of the router's
// patterns or routeUnmatched, the method one of the standard methods or methodOther, the code
// one of the API's codes, a class such as "4xx", or codeOther.
func (m *metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route, method, code := routeLabel(r), methodLabel(r.Method), codeLabel(rec.status)
		m.requests.WithLabelValues(route, method, code).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

// Label values for what the metrics do not name one by one.
const (
	// routeUnmatched labels requests that no route matched.
	routeUnmatched = "unmatched"
	// methodOther labels requests with a method that is not a standard one.
	methodOther = "other"
	// codeOther labels a status code outside 100 to 599.
	codeOther = "other"
)

// routeLabel returns the chi route pattern that handled r, or routeUnmatched. The pattern is
// one the router defines, never taken from the path; a pattern that ends in a wildcard is that
// of a sub-router that found no route, since the API defines no wildcard routes.
func routeLabel(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return routeUnmatched
	}
	p := rc.RoutePattern()
	if p == "" || strings.HasSuffix(p, "*") {
		return routeUnmatched
	}
	return p
}

// methodLabel returns method when it is a standard HTTP method, else methodOther.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return methodOther
}

// labelledCodes are the status codes counted one by one; others are counted by class.
var labelledCodes = map[int]bool{
	http.StatusOK: true, http.StatusCreated: true, http.StatusAccepted: true, http.StatusNoContent: true,
	http.StatusMovedPermanently: true, http.StatusFound: true, http.StatusSeeOther: true, http.StatusNotModified: true,
	http.StatusBadRequest: true, http.StatusUnauthorized: true, http.StatusForbidden: true, http.StatusNotFound: true,
	http.StatusMethodNotAllowed: true, http.StatusNotAcceptable: true, http.StatusConflict: true,
	http.StatusRequestEntityTooLarge: true, http.StatusUnsupportedMediaType: true,
	http.StatusUnprocessableEntity: true, http.StatusTooManyRequests: true,
	http.StatusInternalServerError: true, http.StatusBadGateway: true, http.StatusServiceUnavailable: true,
	http.StatusGatewayTimeout: true,
}

// codeLabel returns the label of a status code: the code itself when it is one of
// labelledCodes, its class ("4xx") for other codes from 100 to 599, else codeOther. A handler
// that wrote nothing answered 200.
func codeLabel(code int) string {
	switch {
	case code == 0:
		return "200"
	case labelledCodes[code]:
		return strconv.Itoa(code)
	case code >= 100 && code <= 599:
		return strconv.Itoa(code/100) + "xx"
	}
	return codeOther
}
