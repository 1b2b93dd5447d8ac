package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/internal/demo"
	"github.com/redrive/redrive/internal/pgtemp"
	"github.com/redrive/redrive/migrations"
)

// Topic names of the demo.
const (
	demoOrdersTopic = "orders"
	demoErrorTopic  = "redrive.errors"
	demoDLTTopic    = "redrive.errors.dlt"
	// A Spring Kafka consumer of payments and a Kafka Connect sink of invoices dead-letter here.
	demoPaymentsTopic = "payments"
	demoSpringDLT     = "payments.DLT"
	demoInvoicesTopic = "invoices"
	demoConnectDLQ    = "jdbc-sink.dlq"
	demoLedgerTopic   = "ledger"
	// A Spring Kafka consumer of Protobuf shipments (schemas in the demo's registry)
	// dead-letters here.
	demoShipmentsTopic = "shipments"
	demoShipmentsDLT   = "shipments.DLT"
	// The demo's two Kafka clusters: the first holds every topic above, the second its own
	// orders, error and dead-letter topics, with a consumer and a generator of its own.
	demoClusterA = "eu-west"
	demoClusterB = "us-east"
)

// demoConfig is the configuration of `redrive demo`.
type demoConfig struct {
	HTTPAddr    string
	KafkaPort   int
	DatabaseURL string
	Rate        float64
	RetryBase   time.Duration
	LogLevel    slog.Level
}

func parseDemoConfig(args []string, stderr io.Writer) (demoConfig, error) {
	fs := newFlagSet("demo", "[flags]", stderr)
	httpAddr := fs.String("http-addr", envOr("REDRIVE_HTTP_ADDR", "localhost:8080"), "listen address of the UI, the API and the metrics (env REDRIVE_HTTP_ADDR)")
	kafkaPort := fs.Int("kafka-port", 0, "port of the in-process Kafka on 127.0.0.1; 0 picks a free one")
	dbURL := fs.String("database-url", envOr("DATABASE_URL", ""), "use this PostgreSQL database instead of an ephemeral cluster; its schema is migrated (env DATABASE_URL)")
	rate := fs.Float64("rate", 4, "records per second the generator produces")
	retryBase := fs.Duration("retry-base", 5*time.Second, "backoff of temporary failures (base x 2^attempt); short, so resends show within a minute")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return demoConfig{}, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "redrive demo: unexpected arguments %q\n", fs.Args())
		return demoConfig{}, errUsage
	}
	cfg := demoConfig{HTTPAddr: *httpAddr, KafkaPort: *kafkaPort, DatabaseURL: *dbURL, Rate: *rate, RetryBase: *retryBase}
	var errs []string
	if *rate <= 0 || *rate > 10000 {
		errs = append(errs, fmt.Sprintf("-rate is %g, want > 0 and <= 10000", *rate))
	}
	if *retryBase <= 0 {
		errs = append(errs, fmt.Sprintf("-retry-base is %s, want > 0", *retryBase))
	}
	if *kafkaPort < 0 || *kafkaPort > 65535 {
		errs = append(errs, fmt.Sprintf("-kafka-port is %d, want 0 to 65535", *kafkaPort))
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		errs = append(errs, fmt.Sprintf("-log-level is %q, want debug, info, warn or error", *logLevel))
	}
	if len(errs) > 0 {
		fmt.Fprintf(stderr, "redrive demo: %s\n", strings.Join(errs, "; "))
		return demoConfig{}, errUsage
	}
	return cfg, nil
}

func runDemo(ctx context.Context, args []string, std stdio) error {
	cfg, err := parseDemoConfig(args, std.err)
	if err != nil {
		return err
	}
	logger := newLogger(std.err, cfg.LogLevel, "text")
	d, err := startDemo(ctx, cfg, logger)
	if err != nil {
		return err
	}
	d.printBanner(std.out)
	return d.wait()
}

// demoRun is a running demo.
type demoRun struct {
	cfg       demoConfig
	log       *slog.Logger
	kafka     *kfake.Cluster
	kafkaB    *kfake.Cluster
	pg        *pgtemp.Cluster
	dsn       string
	uiURL     string
	svc       *service
	group     *errgroup.Group
	generator *demo.Generator
	feeder    *demo.DeadLetters
	shipments *demo.Shipments
	good      atomic.Int64
	recovered atomic.Int64
}

// startDemo starts Kafka, Postgres, the service, the sample consumer and the generator. The demo
// runs until ctx ends; then wait stops everything and removes what it created.
func startDemo(ctx context.Context, cfg demoConfig, logger *slog.Logger) (_ *demoRun, err error) {
	d := &demoRun{cfg: cfg, log: logger}
	defer func() {
		if err != nil {
			d.cleanup()
		}
	}()

	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, demoOrdersTopic, demoErrorTopic, demoDLTTopic,
		demoPaymentsTopic, demoSpringDLT, demoInvoicesTopic, demoConnectDLQ, demoLedgerTopic, demoShipmentsTopic, demoShipmentsDLT),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond)}
	if cfg.KafkaPort != 0 {
		kopts = append(kopts, kfake.Ports(cfg.KafkaPort))
	}
	if d.kafka, err = kfake.NewCluster(kopts...); err != nil {
		return nil, fmt.Errorf("start in-process Kafka: %w", err)
	}
	bootstrap := strings.Join(d.kafka.ListenAddrs(), ",")
	if d.kafkaB, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, demoOrdersTopic, demoErrorTopic, demoDLTTopic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond)); err != nil {
		return nil, fmt.Errorf("start the second in-process Kafka: %w", err)
	}
	bootstrapB := strings.Join(d.kafkaB.ListenAddrs(), ",")

	d.dsn = cfg.DatabaseURL
	if d.dsn == "" {
		if d.pg, err = pgtemp.Start(ctx, pgtemp.Config{}); err != nil {
			return nil, fmt.Errorf("start an ephemeral PostgreSQL: %w", err)
		}
		d.dsn = d.pg.DSN()
	}
	if err := migrateDSN(ctx, d.dsn); err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (choose another with -http-addr): %w", cfg.HTTPAddr, err)
	}
	d.uiURL = "http://" + displayAddr(ln.Addr().String())

	// An in-process schema registry (confluent-kafka-go's mock) holds the shipments' Protobuf
	// schemas; the service reads them from it.
	reg, err := confluentsr.Dial("mock://redrive-demo", "", "")
	if err != nil {
		ln.Close()
		return nil, err
	}
	scfg := serveConfig{
		DatabaseURL: d.dsn,
		GroupID:     "redrive-demo", HTTPAddr: cfg.HTTPAddr, BatchSize: 500, BatchWait: 100 * time.Millisecond,
		MaxEventSize: 16 << 20, StateMetricsInterval: 2 * time.Second, ShutdownTimeout: 15 * time.Second,
		LogLevel: cfg.LogLevel, LogFormat: "text",
		Clusters: []clusterConfig{
			{Name: demoClusterA, Bootstrap: bootstrap, ErrorTopic: demoErrorTopic, DLTTopic: demoDLTTopic, GroupID: "redrive-demo",
				Sources: []intake.Source{
					{Format: redrive.SourceSpring, Topic: demoSpringDLT, Temporality: avro.Temporary},
					{Format: redrive.SourceConnect, Topic: demoConnectDLQ, OriginalTopic: demoInvoicesTopic},
					{Format: redrive.SourceSpring, Topic: demoShipmentsDLT, Temporality: avro.Permanent},
				}},
			{Name: demoClusterB, Bootstrap: bootstrapB, ErrorTopic: demoErrorTopic, DLTTopic: demoDLTTopic, GroupID: "redrive-demo"},
		},
		Operators: operatorConfig{
			ServiceName: "redrive-demo", ResendInterval: time.Second, ResendBatch: 500, ResendConcurrency: 2,
			ResendPartition: "key", RetryBase: cfg.RetryBase, RetryMax: 10 * cfg.RetryBase, RetryMaxAttempts: 5,
			ManualRate: 200, HousekeepingInterval: time.Hour, ResolvedRetention: 24 * time.Hour,
			PermanentRetention: 24 * time.Hour, InsecureNoAuth: true,
			ProxyUserHeader: "X-Forwarded-User", ProxyGroupsHeader: "X-Forwarded-Groups",
		},
		registry: reg,
	}
	if d.svc, err = newService(ctx, scfg, logger); err != nil {
		ln.Close()
		return nil, err
	}

	consumerMetrics := prometheus.WrapRegistererWith(prometheus.Labels{"consumer": "orders"}, d.svc.registry)
	orders, err := demo.NewOrdersConsumer(demo.OrdersConfig{
		Brokers: bootstrap, Topic: demoOrdersTopic, ErrorTopic: demoErrorTopic, Logger: logger, Metrics: consumerMetrics,
		OnHandled: func(_ demo.Order, recovered bool) {
			if recovered {
				d.recovered.Add(1)
			} else {
				d.good.Add(1)
			}
		},
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("sample consumer: %w", err)
	}
	d.svc.mux.Handle("/demo/consumer/health", orders.HealthHandler())
	ordersB, err := demo.NewOrdersConsumer(demo.OrdersConfig{
		Brokers: bootstrapB, Topic: demoOrdersTopic, ErrorTopic: demoErrorTopic, Logger: logger,
		Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"consumer": "orders-" + demoClusterB}, d.svc.registry),
		OnHandled: func(_ demo.Order, recovered bool) {
			if recovered {
				d.recovered.Add(1)
			} else {
				d.good.Add(1)
			}
		},
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("sample consumer of %s: %w", demoClusterB, err)
	}
	generatorB, err := demo.NewGenerator(demo.GeneratorConfig{Brokers: bootstrapB, Topic: demoOrdersTopic, Rate: max(cfg.Rate/2, 0.5), Seed: 2, Logger: logger})
	if err != nil {
		ln.Close()
		return nil, err
	}
	ledgerCfg := demo.LedgerConfig{
		Brokers: bootstrap, Topic: demoLedgerTopic, ErrorTopic: demoErrorTopic, Logger: logger,
		Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"consumer": "ledger"}, d.svc.registry),
	}
	ledger, err := demo.NewLedgerConsumer(ledgerCfg)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("ledger consumer: %w", err)
	}
	d.svc.mux.Handle("/demo/ledger/health", ledger.HealthHandler())
	if d.generator, err = demo.NewGenerator(demo.GeneratorConfig{Brokers: bootstrap, Topic: demoOrdersTopic, Rate: cfg.Rate, Logger: logger}); err != nil {
		ln.Close()
		return nil, err
	}

	if d.feeder, err = demo.NewDeadLetters(demo.DeadLettersConfig{Brokers: bootstrap, SpringTopic: demoSpringDLT,
		SpringOriginalTopic: demoPaymentsTopic, ConnectTopic: demoConnectDLQ, ConnectOriginalTopic: demoInvoicesTopic,
		Rate: max(cfg.Rate/8, 0.25), Logger: logger}); err != nil {
		ln.Close()
		return nil, err
	}

	if d.shipments, err = demo.NewShipments(demo.ShipmentsConfig{Brokers: bootstrap, Registry: reg.Client(), Topic: demoShipmentsDLT,
		OriginalTopic: demoShipmentsTopic, Rate: max(cfg.Rate/12, 0.2), Logger: logger}); err != nil {
		ln.Close()
		return nil, err
	}

	var gctx context.Context
	d.group, gctx = errgroup.WithContext(ctx)
	d.group.Go(func() error { return d.svc.run(gctx, ln) })
	d.group.Go(func() error { return orders.Run(gctx) })
	d.group.Go(func() error { return ordersB.Run(gctx) })
	d.group.Go(func() error { return generatorB.Run(gctx) })
	d.group.Go(func() error { return ledger.Run(gctx) })
	d.group.Go(func() error { return demo.RunLedgerGenerator(gctx, ledgerCfg) })
	d.group.Go(func() error { return d.generator.Run(gctx) })
	d.group.Go(func() error { return d.feeder.Run(gctx) })
	d.group.Go(func() error { return d.shipments.Run(gctx) })
	return d, nil
}

// migrateDSN applies the migrations to the database at dsn.
func migrateDSN(ctx context.Context, dsn string) error {
	db, err := openSQL(dsn)
	if err != nil {
		return fmt.Errorf("database URL: %w", err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		return fmt.Errorf("migrate %s: %w", redactDSN(dsn), err)
	}
	return nil
}

// wait blocks until the demo stops, then stops everything and removes the temporary files.
func (d *demoRun) wait() error {
	err := d.group.Wait()
	d.cleanup()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (d *demoRun) cleanup() {
	if d.svc != nil {
		d.svc.close()
	}
	if d.kafka != nil {
		d.kafka.Close()
	}
	if d.kafkaB != nil {
		d.kafkaB.Close()
	}
	if d.pg != nil {
		if err := d.pg.Stop(context.Background()); err != nil {
			d.log.Error("stop the ephemeral PostgreSQL", "error", err)
		}
	}
}

func (d *demoRun) printBanner(w io.Writer) {
	db := redactDSN(d.dsn)
	if d.pg != nil {
		db += " (ephemeral, removed on exit)"
	}
	fmt.Fprintf(w, `redrive demo is running. Press Ctrl-C to stop.

  UI and API      %[1]s            (no authentication: demo only)
  Kafka           %[2]s    (cluster %[17]s, in-process; e.g. kcat -b %[2]s -L)
                  %[18]s    (cluster %[19]s: its own orders, errors and dead-letter topics)
  PostgreSQL      %[3]s
  Topics          %[4]s (sample consumer "order-service") -> %[5]s (errors) -> redrive;
                  records that are not events go to %[6]s
                  %[9]s (Spring Kafka dead-letter topic of %[10]s, temporary) and
                  %[11]s (Kafka Connect dead-letter queue of %[12]s) -> redrive
                  %[15]s (Spring Kafka dead-letter topic of %[16]s: Protobuf values,
                  schemas in an in-process registry, shown decoded) -> redrive

A generator produces %[7]g orders/s: good ones, undecodable bytes, temporary failures (resent
by the scheduler after ~%[8]s and then handled), permanent failures and panics; a feeder writes
Spring and Connect dead-letter records as the Java code does; their failures record their
source format (spring, connect) and where they were found. The shipments are Protobuf in the
Confluent wire format: open one and its Decoded view shows the message as JSON. A second
cluster, %[19]s, has its own generator and consumer: every failure records its cluster, and its
resends go back there (the UI's cluster filter, or ?cluster=%[19]s in the API).
The ledger consumer ("ledger-service", franz-go, policy fail) halts partition %[14]d of %[13]s
at a poison record within a few seconds while its other partitions keep going: see it in its
health, then release it (the record is dead-lettered and shows up in the UI):
  curl -s '%[1]s/demo/ledger/health'
  curl -s -X POST '%[1]s/demo/ledger/health' -d '{"topic":"%[13]s","partition":%[14]d,"action":"dead-letter"}'

Try this:
  open %[1]s
  curl -s '%[1]s/api/v1/stats'
  curl -s '%[1]s/api/v1/failures?state=PERMANENT&limit=5'
  curl -s '%[1]s/api/v1/failures?temporality=TEMPORARY&state=RESENT&limit=5'
  curl -s '%[1]s/api/v1/failures?cluster=%[19]s&limit=5'
  curl -s -X POST '%[1]s/api/v1/failures/retry' -H 'Content-Type: application/json' \
       -d '{"filter": {"state": ["PERMANENT"]}, "dry_run": true}'
  curl -s '%[1]s/demo/consumer/health'
  curl -s '%[1]s/api/v1/failures?topic=%[16]s&limit=1'   # then .../payload?format=decoded
  curl -s '%[1]s/metrics' | grep ^redrive_
  kcat -b %[2]s -t %[5]s -C -c 1 -e -f '%%s' | go run ./cmd/redrive event decode
`, d.uiURL, strings.Join(d.kafka.ListenAddrs(), ","), db, demoOrdersTopic, demoErrorTopic, demoDLTTopic, d.cfg.Rate, d.cfg.RetryBase,
		demoSpringDLT, demoPaymentsTopic, demoConnectDLQ, demoInvoicesTopic, demoLedgerTopic, demo.LedgerPoisonPartition,
		demoShipmentsDLT, demoShipmentsTopic, demoClusterA, strings.Join(d.kafkaB.ListenAddrs(), ","), demoClusterB)
}

// displayAddr turns a listener address into one a browser can open.
func displayAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// redactDSN hides a password in a connection string.
func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if at := strings.Index(dsn[i+3:], "@"); at >= 0 {
			cred := dsn[i+3 : i+3+at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return dsn[:i+3] + cred[:c] + ":xxxxx" + dsn[i+3+at:]
			}
		}
	}
	return dsn
}
