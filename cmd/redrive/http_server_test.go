package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testHTTPService is a service with no components, serving a mux on a real listener.
type testHTTPService struct {
	addr string
	// bodies counts the request bodies that /echo read whole.
	bodies atomic.Int64
	open   prometheus.Gauge
}

func startHTTPService(t *testing.T, hc httpConfig) *testHTTPService {
	t.Helper()
	ts := &testHTTPService{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "body cut off", http.StatusRequestTimeout)
			return
		}
		ts.bodies.Add(1)
		fmt.Fprintf(w, "%d bytes\n", len(b))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	reg := prometheus.NewRegistry()
	open, err := newOpenConnsGauge(reg, hc.withDefaults().MaxConns)
	if err != nil {
		t.Fatal(err)
	}
	ts.open = open
	svc := &service{
		cfg: serveConfig{ShutdownTimeout: 5 * time.Second, HTTP: hc},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), mux: mux, openConns: open, registry: reg,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return after cancel")
		}
	})
	return ts
}

// get answers GET path on a connection of its own.
func (ts *testHTTPService) get(path string) (int, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + ts.addr + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// dial opens a raw connection to the service.
func (ts *testHTTPService) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed reads c until the server closes it, and fails the test when that takes longer
// than a generous deadline (the deadline only keeps a broken server from hanging the test).
func waitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server did not close the connection", what)
	}
}

// A request body trickled slower than the read timeout is cut off, and the server keeps
// answering other clients meanwhile.
func TestHTTPServerCutsOffTrickledBody(t *testing.T) {
	t.Parallel()
	ts := startHTTPService(t, httpConfig{ReadTimeout: 500 * time.Millisecond})
	c := ts.dial(t)
	if _, err := io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: redrive\r\nContent-Length: 1000000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond) // one byte per tick: a slow client
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
	if code, err := ts.get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("another client during the trickle: %d, %v", code, err)
	}
	waitClosed(t, c, "trickled body")
	if n := ts.bodies.Load(); n != 0 {
		t.Errorf("%d trickled bodies accepted, want 0", n)
	}
	if code, err := ts.get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("another client after the trickle: %d, %v", code, err)
	}
}

// An idle keep-alive connection and a half-sent header are closed; a header over the bound is
// refused with 431.
func TestHTTPServerClosesIdleAndHalfSent(t *testing.T) {
	t.Parallel()
	ts := startHTTPService(t, httpConfig{IdleTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4096})

	idle := ts.dial(t)
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: redrive\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("keep-alive request: %d, close %v", resp.StatusCode, resp.Close)
	}
	waitClosed(t, idle, "idle keep-alive connection")

	half := ts.dial(t)
	if _, err := io.WriteString(half, "GET /healthz HTTP/1.1\r\nHost: red"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, half, "half-sent header")

	big := ts.dial(t)
	if _, err := io.WriteString(big, "GET /healthz HTTP/1.1\r\nHost: redrive\r\nCookie: "+strings.Repeat("c", 64<<10)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(bufio.NewReader(big), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB header: %d, want 431", resp.StatusCode)
	}
}

// Clients beyond the connection bound wait until a connection closes; the connections held
// are still served.
func TestHTTPServerBoundsConnections(t *testing.T) {
	t.Parallel()
	const max = 2
	ts := startHTTPService(t, httpConfig{MaxConns: max, ReadHeaderTimeout: time.Minute})
	held := make([]net.Conn, max)
	for i := range held {
		held[i] = ts.dial(t)
		if _, err := io.WriteString(held[i], "GET /healthz HTTP/1.1\r\nHost: redrive\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(ts.open) != max {
		if time.Now().After(deadline) {
			t.Fatalf("%g connections open, want %d", testutil.ToFloat64(ts.open), max)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}

	type result struct {
		code int
		err  error
	}
	third := make(chan result, 1)
	go func() {
		code, err := ts.get("/healthz")
		third <- result{code, err}
	}()
	select {
	case r := <-third:
		t.Fatalf("a client beyond the bound was served at once: %d, %v", r.code, r.err)
	default:
	}
	if n := testutil.ToFloat64(ts.open); n > max {
		t.Fatalf("%g connections open, bound %d", n, max)
	}

	// A held connection finishes its request: it is served, and its close frees a slot.
	if _, err := io.WriteString(held[0], "Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(held[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("held connection: %d", resp.StatusCode)
	}
	held[0].Close()
	select {
	case r := <-third:
		if r.err != nil || r.code != http.StatusOK {
			t.Errorf("waiting client: %d, %v", r.code, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting client was not served after a slot freed")
	}
	if n := testutil.ToFloat64(ts.open); n > max {
		t.Errorf("%g connections open, bound %d", n, max)
	}
}
