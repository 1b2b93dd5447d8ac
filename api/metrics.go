package api

import (
	"fmt"
	"net/http"
	"strconv"
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

// middleware records every request by its route pattern (not its path, which holds ids).
func (m *metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if p := rc.RoutePattern(); p != "" {
				route = p
			}
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.status)).Inc()
		m.duration.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}
