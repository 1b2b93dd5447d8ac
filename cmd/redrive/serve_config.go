package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// serveConfig is the configuration of `redrive serve`, from flags with environment defaults.
type serveConfig struct {
	DatabaseURL    string
	KafkaBootstrap string
	ErrorTopic     string
	// Sources are the further topics the intake reads (-source, REDRIVE_SOURCES).
	Sources  []intake.Source
	DLTTopic string
	GroupID  string
	// GroupInstanceID makes the intake a static member of its consumer group (empty: dynamic).
	GroupInstanceID   string
	SchemaRegistryURL string
	// SchemaRegistryAuth is "user:password" for the registry's basic authentication.
	SchemaRegistryAuth string
	// registry, when not nil, is the registry client to use instead of dialing
	// SchemaRegistryURL: the demo's in-process registry, which its feeders share.
	registry avro.Registry
	// KafkaConfig holds extra librdkafka settings for every Kafka client of the service.
	KafkaConfig kafka.ConfigMap
	HTTPAddr    string
	// HTTP bounds what clients may hold of the HTTP server.
	HTTP httpConfig

	BatchSize            int
	BatchWait            time.Duration
	Writers              int
	MaxEventSize         int
	StateMetricsInterval time.Duration
	ShutdownTimeout      time.Duration

	LogLevel  slog.Level
	LogFormat string

	// Operators configures resends, the REST API and the UI.
	Operators operatorConfig

	// Clusters are the Kafka clusters: the one of the flags above, named store.DefaultCluster,
	// when -kafka-bootstrap is given, then those of the clusters file (ClustersFile).
	Clusters     []clusterConfig
	ClustersFile string
	// CrossCluster are the allowed resends from one cluster's failures to another cluster.
	CrossCluster []resend.Route

	// kafkaCheckInterval and resendSendTimeout shorten the intake's look at the brokers and
	// the wait for a resend's acknowledgement in tests; zero means the packages' defaults.
	kafkaCheckInterval time.Duration
	resendSendTimeout  time.Duration
}

// envFlags defines flags whose defaults come from environment variables, and collects the
// errors of environment values that do not parse, naming the variable.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
	// envOf maps a flag name to its variable, for validation messages.
	envOf map[string]string
}

func (e *envFlags) describe(usage, env string) string { return usage + " (env " + env + ")" }

func (e *envFlags) String(name, env, def, usage string) *string {
	e.envOf[name] = env
	if v := e.getenv(env); v != "" {
		def = v
	}
	return e.fs.String(name, def, e.describe(usage, env))
}

func (e *envFlags) Int(name, env string, def int, usage string) *int {
	e.envOf[name] = env
	if v := e.getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not an integer", env, v))
		} else {
			def = n
		}
	}
	return e.fs.Int(name, def, e.describe(usage, env))
}

func (e *envFlags) Float(name, env string, def float64, usage string) *float64 {
	e.envOf[name] = env
	if v := e.getenv(env); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not a number", env, v))
		} else {
			def = f
		}
	}
	return e.fs.Float64(name, def, e.describe(usage, env))
}

func (e *envFlags) Bool(name, env string, def bool, usage string) *bool {
	e.envOf[name] = env
	if v := e.getenv(env); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not a boolean (true or false)", env, v))
		} else {
			def = b
		}
	}
	return e.fs.Bool(name, def, e.describe(usage, env))
}

func (e *envFlags) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	e.envOf[name] = env
	if v := e.getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not a duration (e.g. 250ms, 30s)", env, v))
		} else {
			def = d
		}
	}
	return e.fs.Duration(name, def, e.describe(usage, env))
}

// Sources defines a repeatable flag of intake sources whose default is the variable's list
// (entries separated by commas or newlines); given on the command line, the flags replace the
// variable's entries. The returned function parses them once the flags are parsed.
func (e *envFlags) Sources(name, env, usage string) func() ([]intake.Source, error) {
	e.envOf[name] = env
	v := &sourceFlag{env: e.getenv(env)}
	e.fs.Var(v, name, e.describe(usage, env))
	return func() ([]intake.Source, error) {
		if v.set {
			var out []intake.Source
			var errs []error
			for _, spec := range v.flags {
				s, err := intake.ParseSource(spec)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				out = append(out, s)
			}
			return out, errors.Join(errs...)
		}
		return intake.ParseSources(v.env)
	}
}

// sourceFlag collects the -source flags.
type sourceFlag struct {
	env   string
	flags []string
	set   bool
}

func (f *sourceFlag) String() string {
	if f == nil {
		return ""
	}
	if f.set {
		return strings.Join(f.flags, ",")
	}
	return f.env
}

func (f *sourceFlag) Set(v string) error {
	f.set = true
	f.flags = append(f.flags, v)
	return nil
}

// name returns "VAR (-flag)" for messages.
func (e *envFlags) name(flagName string) string {
	return e.envOf[flagName] + " (-" + flagName + ")"
}

// parseServeConfig parses the flags of `redrive serve`, with defaults from getenv, and validates
// them. A usage problem is printed to stderr and returned as errUsage.
func parseServeConfig(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	fs := newFlagSet("serve", "[flags]", stderr)
	ef := &envFlags{fs: fs, getenv: getenv, envOf: map[string]string{}}
	dbURL := ef.String("database-url", "REDRIVE_DATABASE_URL", "", "Postgres connection string (required)")
	bootstrap := ef.String("kafka-bootstrap", "REDRIVE_KAFKA_BOOTSTRAP", "", "Kafka bootstrap servers, host:port[,host:port] (required)")
	errorTopic := ef.String("error-topic", "REDRIVE_ERROR_TOPIC", "", "topic of the MessageProcessingFailedEvents to consume, the same as -source mpfe:TOPIC (required unless -source is given)")
	sources := ef.Sources("source", "REDRIVE_SOURCES", "a topic to read failures from, FORMAT:TOPIC[=ORIGINAL_TOPIC][?option=value&...] with FORMAT mpfe, spring, connect, streams or raw; repeatable (the variable: entries separated by commas or newlines); see docs/configuration.md")
	dltTopic := ef.String("dlt-topic", "REDRIVE_DLT_TOPIC", "", "the service's own dead-letter topic for records that are not valid events (required, not the error topic)")
	groupID := ef.String("group-id", "REDRIVE_GROUP_ID", intake.DefaultGroupID, "Kafka consumer group of the intake")
	groupInstanceID := ef.String("group-instance-id", "REDRIVE_GROUP_INSTANCE_ID", "", "static membership of the intake's consumer (group.instance.id), unique per instance and stable across its restarts, e.g. the pod name; empty: dynamic membership")
	registry := ef.String("schema-registry-url", "REDRIVE_SCHEMA_REGISTRY_URL", "", "schema registry URL; without it, dead-letter events use Avro single-object encoding and Confluent-framed events decode with the built-in schema")
	registryAuth := ef.String("schema-registry-auth", "REDRIVE_SCHEMA_REGISTRY_AUTH", "", "user:password for the schema registry's basic authentication")
	kafkaConfig := ef.String("kafka-config", "REDRIVE_KAFKA_CONFIG", "", "extra librdkafka settings for every Kafka client, comma-separated key=value (e.g. security.protocol=SASL_SSL,sasl.mechanism=PLAIN,sasl.username=u,sasl.password=p)")
	httpAddr := ef.String("http-addr", "REDRIVE_HTTP_ADDR", ":8080", "listen address of /metrics, /healthz, /readyz (and the API and UI)")
	readHeaderTimeout := ef.Duration("http-read-header-timeout", "REDRIVE_HTTP_READ_HEADER_TIMEOUT", defaultHTTPReadHeaderTimeout, "longest time to read a request's header")
	readTimeout := ef.Duration("http-read-timeout", "REDRIVE_HTTP_READ_TIMEOUT", defaultHTTPReadTimeout, "longest time to read a whole request, body included; a slower body is cut off")
	writeTimeout := ef.Duration("http-write-timeout", "REDRIVE_HTTP_WRITE_TIMEOUT", defaultHTTPWriteTimeout, "longest time from the end of a request's header to the end of its response")
	idleTimeout := ef.Duration("http-idle-timeout", "REDRIVE_HTTP_IDLE_TIMEOUT", defaultHTTPIdleTimeout, "how long a keep-alive connection may wait for its next request")
	maxHeaderBytes := ef.Int("http-max-header-bytes", "REDRIVE_HTTP_MAX_HEADER_BYTES", defaultHTTPMaxHeaderBytes, "largest request header, in bytes; a larger one gets 431")
	maxConns := ef.Int("http-max-conns", "REDRIVE_HTTP_MAX_CONNS", defaultHTTPMaxConns, "most HTTP connections open at once; further clients wait until one closes")
	batchSize := ef.Int("batch-size", "REDRIVE_INTAKE_BATCH_SIZE", intake.DefaultBatchSize, "most records the intake writes in one transaction")
	batchWait := ef.Duration("batch-wait", "REDRIVE_INTAKE_BATCH_WAIT", intake.DefaultBatchWait, "longest wait for more records after the first of a batch")
	writers := ef.Int("intake-writers", "REDRIVE_INTAKE_WRITERS", intake.DefaultWriters, "transactions the intake writes to Postgres at once, each for its share of the causing messages")
	maxSize := ef.Int("max-event-size", "REDRIVE_MAX_EVENT_SIZE", avro.DefaultMaxSize, "largest event accepted, in bytes; larger records go to the dead-letter topic")
	statsEvery := ef.Duration("state-metrics-interval", "REDRIVE_STATE_METRICS_INTERVAL", intake.DefaultStateMetricsInterval, "refresh interval of the failures-by-state gauges")
	shutdown := ef.Duration("shutdown-timeout", "REDRIVE_SHUTDOWN_TIMEOUT", intake.DefaultShutdownTimeout, "how long a shutdown may take to finish the work in flight")
	logLevel := ef.String("log-level", "REDRIVE_LOG_LEVEL", "info", "debug, info, warn or error")
	logFormat := ef.String("log-format", "REDRIVE_LOG_FORMAT", "text", "text or json")
	clustersFile := ef.String("clusters-file", "REDRIVE_CLUSTERS_FILE", "", "a YAML or JSON file of named Kafka clusters (bootstrap, security, schema registry, topics each reads) and the routes a resend may take between them; with -kafka-bootstrap, those flags are one more cluster, named default; see docs/configuration.md")
	operators := defineOperatorFlags(ef)
	if len(ef.errs) > 0 {
		err := errors.Join(ef.errs...)
		fmt.Fprintf(stderr, "redrive serve: %v\n", err)
		return serveConfig{}, errUsage
	}
	if err := parseFlags(fs, args); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "redrive serve: unexpected arguments %q\n", fs.Args())
		return serveConfig{}, errUsage
	}

	cfg := serveConfig{
		DatabaseURL: *dbURL, KafkaBootstrap: *bootstrap, ErrorTopic: *errorTopic, DLTTopic: *dltTopic,
		GroupID: *groupID, GroupInstanceID: strings.TrimSpace(*groupInstanceID), SchemaRegistryURL: *registry, SchemaRegistryAuth: *registryAuth, HTTPAddr: *httpAddr,
		BatchSize: *batchSize, BatchWait: *batchWait, Writers: *writers, MaxEventSize: *maxSize,
		StateMetricsInterval: *statsEvery, ShutdownTimeout: *shutdown, LogFormat: *logFormat,
		ClustersFile: strings.TrimSpace(*clustersFile),
		HTTP: httpConfig{
			ReadHeaderTimeout: *readHeaderTimeout, ReadTimeout: *readTimeout, WriteTimeout: *writeTimeout,
			IdleTimeout: *idleTimeout, MaxHeaderBytes: *maxHeaderBytes, MaxConns: *maxConns,
		},
	}
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s "+format, append([]any{ef.name(flagName)}, args...)...))
	}
	// The flags define the cluster named default unless a clusters file alone gives the
	// clusters.
	flagsCluster := strings.TrimSpace(cfg.KafkaBootstrap) != "" || cfg.ClustersFile == ""
	for _, req := range []struct{ flag, value string }{
		{"database-url", cfg.DatabaseURL}, {"group-id", cfg.GroupID}, {"http-addr", cfg.HTTPAddr},
	} {
		if strings.TrimSpace(req.value) == "" {
			bad(req.flag, "is required")
		}
	}
	if flagsCluster {
		if strings.TrimSpace(cfg.KafkaBootstrap) == "" {
			bad("kafka-bootstrap", "is required (or give REDRIVE_CLUSTERS_FILE (-clusters-file))")
		}
		if strings.TrimSpace(cfg.DLTTopic) == "" {
			bad("dlt-topic", "is required")
		}
	}
	srcs, srcErr := sources()
	cfg.Sources = srcs
	if srcErr != nil {
		bad("source", "has a bad entry:\n%v", srcErr)
	}
	if !flagsCluster && (cfg.ErrorTopic != "" || len(cfg.Sources) > 0) {
		bad("error-topic", "and REDRIVE_SOURCES (-source) are topics of the cluster of REDRIVE_KAFKA_BOOTSTRAP (-kafka-bootstrap), which is not given: name the topics of the file's clusters in the file")
	}
	if flagsCluster && strings.TrimSpace(cfg.ErrorTopic) == "" && len(cfg.Sources) == 0 && srcErr == nil {
		bad("error-topic", "is required (or give REDRIVE_SOURCES (-source))")
	}
	if cfg.ErrorTopic != "" && cfg.ErrorTopic == cfg.DLTTopic {
		bad("dlt-topic", "is the error topic %q: a bad record would loop forever; use a topic of its own", cfg.ErrorTopic)
	}
	seen := map[string]string{}
	if cfg.ErrorTopic != "" {
		seen[cfg.ErrorTopic] = "mpfe:" + cfg.ErrorTopic + " (-error-topic)"
	}
	for _, src := range cfg.Sources {
		if prev, ok := seen[src.Topic]; ok {
			bad("source", "entry %q reads topic %q, which %s reads already", src.String(), src.Topic, prev)
		}
		seen[src.Topic] = src.String()
		if src.Topic == cfg.DLTTopic {
			bad("source", "entry %q reads the dead-letter topic %q (-dlt-topic): a bad record would loop forever", src.String(), cfg.DLTTopic)
		}
	}
	if kc, err := parseKafkaConfig(*kafkaConfig); err != nil {
		bad("kafka-config", "%v", err)
	} else {
		cfg.KafkaConfig = kc
	}
	if cfg.SchemaRegistryAuth != "" && !strings.Contains(cfg.SchemaRegistryAuth, ":") {
		bad("schema-registry-auth", "wants user:password")
	}
	if flagsCluster {
		cfg.Clusters = append(cfg.Clusters, clusterConfig{
			Name: store.DefaultCluster, Bootstrap: cfg.KafkaBootstrap, KafkaConfig: cfg.KafkaConfig,
			SchemaRegistryURL: cfg.SchemaRegistryURL, SchemaRegistryAuth: cfg.SchemaRegistryAuth,
			ErrorTopic: cfg.ErrorTopic, Sources: cfg.Sources, DLTTopic: cfg.DLTTopic, GroupID: cfg.GroupID,
			GroupInstanceID: cfg.GroupInstanceID, origin: "REDRIVE_KAFKA_BOOTSTRAP (-kafka-bootstrap)",
		})
	}
	if cfg.ClustersFile != "" {
		fileClusters, routes, err := readClustersFile(cfg.ClustersFile, getenv, clusterDefaults{
			DLTTopic: strings.TrimSpace(cfg.DLTTopic), GroupID: cfg.GroupID, GroupInstanceID: cfg.GroupInstanceID,
		})
		for _, c := range fileClusters {
			if flagsCluster && c.Name == store.DefaultCluster {
				err = errors.Join(err, fmt.Errorf("%s.name: %q is the cluster of REDRIVE_KAFKA_BOOTSTRAP (-kafka-bootstrap); give this one another name", c.origin, c.Name))
			}
		}
		cfg.Clusters = append(cfg.Clusters, fileClusters...)
		cfg.CrossCluster = routes
		err = errors.Join(err, errors.Join(validateRoutes(routes, cfg.Clusters)...))
		if err != nil {
			bad("clusters-file", "%s:\n%s", cfg.ClustersFile, indent(err))
		}
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > intake.MaxBatchSize {
		bad("batch-size", "is %d, want 1 to %d", cfg.BatchSize, intake.MaxBatchSize)
	}
	if cfg.Writers < 1 || cfg.Writers > intake.MaxWriters {
		bad("intake-writers", "is %d, want 1 to %d", cfg.Writers, intake.MaxWriters)
	}
	if cfg.BatchWait <= 0 {
		bad("batch-wait", "is %s, want > 0", cfg.BatchWait)
	}
	if cfg.MaxEventSize < 1024 {
		bad("max-event-size", "is %d, want at least 1024", cfg.MaxEventSize)
	}
	if cfg.StateMetricsInterval <= 0 {
		bad("state-metrics-interval", "is %s, want > 0", cfg.StateMetricsInterval)
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"http-read-header-timeout", cfg.HTTP.ReadHeaderTimeout}, {"http-read-timeout", cfg.HTTP.ReadTimeout},
		{"http-write-timeout", cfg.HTTP.WriteTimeout}, {"http-idle-timeout", cfg.HTTP.IdleTimeout},
	} {
		if d.value <= 0 {
			bad(d.flag, "is %s, want > 0", d.value)
		}
	}
	if cfg.HTTP.MaxHeaderBytes < 1024 || cfg.HTTP.MaxHeaderBytes > 16<<20 {
		bad("http-max-header-bytes", "is %d, want 1024 to %d", cfg.HTTP.MaxHeaderBytes, 16<<20)
	}
	if cfg.HTTP.MaxConns < 1 || cfg.HTTP.MaxConns > 1<<20 {
		bad("http-max-conns", "is %d, want 1 to %d", cfg.HTTP.MaxConns, 1<<20)
	}
	if cfg.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "is %s, want > 0", cfg.ShutdownTimeout)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		bad("log-level", "is %q, want debug, info, warn or error", *logLevel)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		bad("log-format", "is %q, want text or json", cfg.LogFormat)
	}
	var opErrs []error
	cfg.Operators, opErrs = operators()
	errs = append(errs, opErrs...)
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "redrive serve: invalid configuration:\n%v\n", indent(err))
		return serveConfig{}, errUsage
	}
	return cfg, nil
}

// parseKafkaConfig parses comma-separated key=value librdkafka settings. The settings that
// redrive owns (bootstrap, group, commits, acks, idempotence) cannot be set there.
func parseKafkaConfig(spec string) (kafka.ConfigMap, error) {
	cm := kafka.ConfigMap{}
	owned := map[string]bool{"bootstrap.servers": true, "group.id": true, "enable.auto.commit": true,
		"enable.auto.offset.store": true, "acks": true, "enable.idempotence": true}
	for _, kv := range strings.Split(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		if owned[k] {
			return nil, fmt.Errorf("%s is set by redrive itself", k)
		}
		cm[k] = strings.TrimSpace(v)
	}
	return cm, nil
}

// indent puts each line of err's message on its own indented line.
func indent(err error) string {
	return "  " + strings.ReplaceAll(err.Error(), "\n", "\n  ")
}

// newLogger returns the service's logger on w.
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
