package main

import (
	"context"
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
	var failed []string
	for i := range s.ready {
		c := &s.ready[i]
		err := c.check(ctx)
		c.report(s.log, err)
		if err != nil {
			failed = append(failed, c.name+": unavailable")
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready\n"+strings.Join(failed, "\n")+"\n")
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
