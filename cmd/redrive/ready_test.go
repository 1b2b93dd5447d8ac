package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// /readyz, unauthenticated, says which check failed but not why: the database's user, name,
// host and port go to the log only.
func TestReadyzHidesReasons(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	_, port, _ := net.SplitHostPort(addr)
	pool, err := pgxpool.New(context.Background(), "postgres://secretuser@"+addr+"/secretdb?connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var logs bytes.Buffer
	svc := &service{log: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)), ready: []readyCheck{postgresReady(pool)}}
	for range 2 {
		w := httptest.NewRecorder()
		svc.handleReady(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		body := w.Body.String()
		if w.Code != http.StatusServiceUnavailable || body != "not ready\npostgres: unavailable\n" {
			t.Errorf("/readyz with the database down = %d %q", w.Code, body)
		}
		for _, secret := range []string{"secretuser", "secretdb", port, "127.0.0.1"} {
			if strings.Contains(body, secret) {
				t.Errorf("/readyz tells %q: %q", secret, body)
			}
		}
	}
	if !strings.Contains(logs.String(), port) || strings.Count(logs.String(), "not ready") != 1 {
		t.Errorf("the log should hold the reason once:\n%s", logs.String())
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
