package main

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of httpConfig: generous for the API and the UI (a bulk action answers within its
// own timeout, a payload download is at most the largest event), short enough that slow or
// idle clients cannot hold the server's connections.
const (
	defaultHTTPReadHeaderTimeout = 10 * time.Second
	defaultHTTPReadTimeout       = 30 * time.Second
	defaultHTTPWriteTimeout      = 60 * time.Second
	defaultHTTPIdleTimeout       = 120 * time.Second
	defaultHTTPMaxHeaderBytes    = 64 << 10
	defaultHTTPMaxConns          = 1024
)

// httpConfig bounds what one client may hold of the HTTP server. A zero field means its
// default.
type httpConfig struct {
	// ReadHeaderTimeout bounds the reading of a request's header. Defaults to 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request, body included: a body trickled
	// slower is cut off. Defaults to 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's header to the end of its
	// response. Defaults to 60s.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next request.
	// Defaults to 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header, in bytes; a larger one gets 431. Defaults to
	// 64 KiB.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once; further clients wait in the listen
	// backlog until one closes. Defaults to 1024.
	MaxConns int
}

// withDefaults returns c with its zero fields set to their defaults.
func (c httpConfig) withDefaults() httpConfig {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&c.ReadHeaderTimeout, defaultHTTPReadHeaderTimeout)
	set(&c.ReadTimeout, defaultHTTPReadTimeout)
	set(&c.WriteTimeout, defaultHTTPWriteTimeout)
	set(&c.IdleTimeout, defaultHTTPIdleTimeout)
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = defaultHTTPMaxHeaderBytes
	}
	if c.MaxConns == 0 {
		c.MaxConns = defaultHTTPMaxConns
	}
	return c
}

// newHTTPServer returns a server of h with the bounds of c (zero fields: defaults).
func newHTTPServer(c httpConfig, h http.Handler) *http.Server {
	c = c.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
	}
}

// limitListener accepts at most a fixed number of connections open at once: Accept waits
// until an accepted connection closes, and the clients beyond the bound wait in the kernel's
// listen backlog.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	open      prometheus.Gauge
}

// newLimitListener bounds ln to max open connections, counted by the gauge open; without one
// (nil) they are counted by a gauge of its own that no registry exports.
func newLimitListener(ln net.Listener, max int, open prometheus.Gauge) *limitListener {
	if open == nil {
		open = prometheus.NewGauge(prometheus.GaugeOpts{Name: "redrive_http_open_connections", Help: "HTTP connections open."})
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{}), open: open}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.open.Inc()
	return &limitConn{Conn: c, release: func() { l.open.Dec(); <-l.slots }}, nil
}

// Close closes the listener and ends an Accept that waits for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn frees its listener's slot when it is closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and frees its slot.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// newOpenConnsGauge returns the gauge of the HTTP connections open, registered on reg.
func newOpenConnsGauge(reg prometheus.Registerer, max int) (prometheus.Gauge, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "redrive_http_open_connections",
		Help: "HTTP connections open; at most redrive_http_max_connections.",
	})
	limit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "redrive_http_max_connections",
		Help: "The bound of the HTTP connections open at once (REDRIVE_HTTP_MAX_CONNS).",
	})
	limit.Set(float64(max))
	for _, c := range []prometheus.Collector{g, limit} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return g, nil
}
