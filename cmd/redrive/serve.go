package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/internal/telemetry"
	"github.com/redrive/redrive/migrations"
	"github.com/redrive/redrive/store"
)

func runServe(ctx context.Context, args []string, std stdio) error {
	cfg, err := parseServeConfig(args, os.Getenv, std.err)
	if err != nil {
		return err
	}
	logger := newLogger(std.err, cfg.LogLevel, cfg.LogFormat)
	svc, err := newService(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer svc.close()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on REDRIVE_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	logger.Info("redrive serving", "http_addr", ln.Addr().String(), "clusters", clusterNames(cfg.clusters()), "error_topic", cfg.ErrorTopic, "dlt_topic", cfg.DLTTopic)
	return svc.run(ctx, ln)
}

// component is a background part of the service; Run returns when ctx ends.
type component struct {
	name string
	run  func(ctx context.Context) error
}

// service is `redrive serve` assembled from its configuration: the shared Postgres pool and
// store, a metrics registry, an HTTP mux (where /metrics, /healthz and /readyz live and /api/
// and / can be mounted), and background components run under one errgroup. A further part
// joins in build: a component{name, Run} in components, a readyCheck in ready, routes on mux.
type service struct {
	cfg      serveConfig
	log      *slog.Logger
	pool     *pgxpool.Pool
	store    *store.Store
	registry *prometheus.Registry
	mux      *http.ServeMux
	// openConns counts the HTTP connections open; nil until build.
	openConns  prometheus.Gauge
	components []component
	ready      []readyCheck
	tracing    *telemetry.Tracing // off (nil provider) unless OTEL_TRACES_EXPORTER says
	// intakes are the intakes of the clusters, in configuration order.
	intakes []*intake.Intake
	// clusterErr, set by buildOperators, says why resends to a cluster wait (nil: they go).
	clusterErr func(ctx context.Context, cluster string) error
}

// newService connects to Postgres, refuses a schema that is not exactly this binary's, and
// builds the components.
func newService(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*service, error) {
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("REDRIVE_DATABASE_URL: %w", err)
	}
	s := &service{cfg: cfg, log: logger, pool: pool, registry: prometheus.NewRegistry(), mux: http.NewServeMux()}
	if err := s.startTracing(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.build(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *service) build(ctx context.Context) error {
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.pool.Ping(pingCtx); err != nil {
		return fmt.Errorf("connect to postgres (REDRIVE_DATABASE_URL): %w", err)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	err := migrations.Check(ctx, db)
	_ = db.Close()
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	st, err := store.New(store.Config{Pool: s.pool})
	if err != nil {
		return err
	}
	s.store = st
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.openConns, err = newOpenConnsGauge(s.registry, s.cfg.HTTP.withDefaults().MaxConns); err != nil {
		return err
	}

	s.ready = append(s.ready, postgresReady(s.pool))
	var (
		registries   = map[string]avro.Registry{}
		reactivators = map[string]*intake.Reactivator{}
	)
	for _, cl := range s.cfg.clusters() {
		registry, err := s.registryClient(cl)
		if err != nil {
			return err
		}
		registries[cl.Name] = registry
		codec, err := avro.NewCodec(avro.Config{Registry: registry, MaxSize: s.cfg.MaxEventSize})
		if err != nil {
			return err
		}
		in, err := intake.New(intake.Config{
			Store:              st,
			NextAttempt:        s.cfg.Operators.backoff().Next,
			Codec:              codec,
			Cluster:            cl.Name,
			Bootstrap:          cl.Bootstrap,
			ConsumerConfig:     cl.KafkaConfig,
			ProducerConfig:     cl.KafkaConfig,
			Topic:              cl.ErrorTopic,
			Sources:            cl.Sources,
			DeadLetterTopic:    cl.DLTTopic,
			GroupID:            cl.GroupID,
			GroupInstanceID:    cl.GroupInstanceID,
			BatchSize:          s.cfg.BatchSize,
			BatchWait:          s.cfg.BatchWait,
			Writers:            s.cfg.Writers,
			ShutdownTimeout:    s.cfg.ShutdownTimeout,
			KafkaCheckInterval: s.cfg.kafkaCheckInterval,
			Logger:             s.log,
			Registerer:         s.registry,
			TracerProvider:     s.tracerProvider(),
		})
		if err != nil {
			return fmt.Errorf("intake of cluster %s: %w", cl.Name, err)
		}
		re, err := in.NewReactivator()
		if err != nil {
			return fmt.Errorf("reactivator of cluster %s: %w", cl.Name, err)
		}
		reactivators[cl.Name] = re
		name := "intake"
		if s.multiCluster() {
			name = "intake " + cl.Name
		}
		s.components = append(s.components,
			component{name: name, run: in.Run},
			component{name: "reactivator " + cl.Name, run: func(ctx context.Context) error {
				<-ctx.Done()
				return re.Close(context.WithoutCancel(ctx))
			}},
		)
		s.intakes = append(s.intakes, in)
	}
	var clusterNames []string
	for _, cl := range s.cfg.clusters() {
		clusterNames = append(clusterNames, cl.Name)
	}
	states, err := intake.NewStateMetrics(intake.StateMetricsConfig{
		Store: st, Interval: s.cfg.StateMetricsInterval, Logger: s.log, Registerer: s.registry,
		Clusters: clusterNames,
	})
	if err != nil {
		return fmt.Errorf("state metrics: %w", err)
	}
	s.components = append(s.components, component{name: "state-metrics", run: states.Run})
	s.ready = append(s.ready, s.intakeReady()...)
	if err := s.buildOperators(ctx, registries, reactivators); err != nil {
		return err
	}

	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	return nil
}

// registryClient returns the schema registry client of the cluster, or nil without one; the
// configuration's in-process registry (the demo's), when set, serves every cluster.
func (s *service) registryClient(cl clusterConfig) (avro.Registry, error) {
	if s.cfg.registry != nil {
		return s.cfg.registry, nil
	}
	if cl.SchemaRegistryURL == "" {
		return nil, nil
	}
	user, pass, ok := strings.Cut(cl.SchemaRegistryAuth, ":")
	if !ok {
		user, pass = "", ""
	}
	reg, err := confluentsr.Dial(cl.SchemaRegistryURL, user, pass)
	if err != nil {
		if cl.Name == store.DefaultCluster {
			return nil, fmt.Errorf("REDRIVE_SCHEMA_REGISTRY_URL: %w", err)
		}
		return nil, fmt.Errorf("%s.schema_registry.url: %w", cl.origin, err)
	}
	return reg, nil
}

// run serves HTTP on ln and runs every component until ctx ends or one of them fails; then it
// shuts everything down within the shutdown timeout and returns the first error. The server
// holds at most cfg.HTTP.MaxConns connections, each within the timeouts of cfg.HTTP.
func (s *service) run(ctx context.Context, ln net.Listener) error {
	hc := s.cfg.HTTP.withDefaults()
	srv := newHTTPServer(hc, s.mux)
	ln = newLimitListener(ln, hc.MaxConns, s.openConns)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range s.components {
		g.Go(func() error {
			err := c.run(gctx)
			if err == nil && gctx.Err() == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil {
				s.log.Error("component failed", "component", c.name, "error", err)
				return fmt.Errorf("%s: %w", c.name, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			return fmt.Errorf("http shutdown: %w", err)
		}
		return nil
	})
	err := g.Wait()
	s.log.Info("redrive stopped")
	return err
}

// multiCluster reports whether the service reads other clusters than the one named default.
func (s *service) multiCluster() bool { return s.cfg.multiCluster() }

// close releases the pool.
func (s *service) close() {
	s.stopTracing()
	s.pool.Close()
}
