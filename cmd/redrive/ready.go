package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 2 * time.Second

// readyCheck is one condition of /readyz.
type readyCheck struct {
	name  string
	check func(ctx context.Context) error
	// cluster marks the check of one Kafka cluster of several: when it fails with an
	// *unreachableError, the service stays ready (naming the cluster) while another cluster
	// is up.
	cluster bool

	mu   sync.Mutex
	last string // the reason of the last failure; "" after a success
}

// handleReady answers 200 when every readiness check passes, else 503 naming the failed
// checks. The answer is unauthenticated: it says only which checks failed, never why (errors
// name hosts, ports, users and databases); the reasons go to the log, each time a check's
// reason changes.
func (s *service) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	var failed, unreachable []string
	clusters, clustersUp := 0, 0
	for i := range s.ready {
		c := &s.ready[i]
		err := c.check(ctx)
		c.report(s.log, err)
		var ue *unreachableError
		switch {
		case c.cluster && errors.As(err, &ue):
			clusters++
			unreachable = append(unreachable, c.name+": unreachable")
		case c.cluster && err == nil:
			clusters++
			clustersUp++
		case err != nil:
			failed = append(failed, c.name+": unavailable")
		}
	}
	if clusters > 0 && clustersUp == 0 {
		failed, unreachable = append(failed, unreachable...), nil
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready\n"+strings.Join(failed, "\n")+"\n")
		return
	}
	if len(unreachable) > 0 {
		_, _ = io.WriteString(w, "ready, degraded\n"+strings.Join(unreachable, "\n")+"\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

// report logs the outcome of a check when it differs from the previous one: a failure with its
// reason, a new reason, or the recovery.
func (c *readyCheck) report(log *slog.Logger, err error) {
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	c.mu.Lock()
	changed := reason != c.last
	c.last = reason
	c.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		log.Warn("not ready", "check", c.name, "error", err)
	default:
		log.Info("ready again", "check", c.name)
	}
}

// postgresReady is the readiness check of the database: a ping on the pool.
func postgresReady(pool *pgxpool.Pool) readyCheck {
	return readyCheck{name: "postgres", check: pool.Ping}
}

// unreachableError marks the failure of a cluster's check that concerns the cluster alone (its
// brokers do not answer): with other clusters up, the service stays ready and names it.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// intakeReady returns the readiness checks of the intakes: with one cluster, the check
// "intake" as ever; with several, one check "cluster NAME" per cluster, which fails the
// service only when the cause is not the cluster's own (Postgres) or every cluster is
// unreachable.
func (s *service) intakeReady() []readyCheck {
	if !s.multiCluster() {
		in := s.intakes[0]
		return []readyCheck{{name: "intake", check: func(context.Context) error { return in.Ready() }}}
	}
	var out []readyCheck
	for _, in := range s.intakes {
		out = append(out, readyCheck{name: "cluster " + in.Cluster(), cluster: true, check: func(ctx context.Context) error {
			if err := in.KafkaErr(); err != nil {
				return &unreachableError{fmt.Errorf("intake: %w", err)}
			}
			if s.clusterErr != nil {
				if err := s.clusterErr(ctx, in.Cluster()); err != nil {
					return &unreachableError{fmt.Errorf("resend: %w", err)}
				}
			}
			return in.Ready()
		}})
	}
	return out
}
