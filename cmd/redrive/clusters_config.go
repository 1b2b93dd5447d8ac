package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.yaml.in/yaml/v3"

	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// clusterConfig is one Kafka cluster of `redrive serve`: where it is, how to reach it, its
// schema registry, and the topics the intake reads there. Resends of its failures go back to it.
type clusterConfig struct {
	Name      string
	Bootstrap string
	// KafkaConfig holds the cluster's extra librdkafka settings (security: SASL, TLS).
	KafkaConfig        kafka.ConfigMap
	SchemaRegistryURL  string
	SchemaRegistryAuth string
	// ErrorTopic and Sources are the topics the intake reads on the cluster.
	ErrorTopic string
	Sources    []intake.Source
	// DLTTopic is the service's own dead-letter topic on the cluster.
	DLTTopic        string
	GroupID         string
	GroupInstanceID string
	// origin names where the cluster was configured, for messages: "clusters[1]" or the flags.
	origin string
}

// clustersFile is the document of -clusters-file (YAML or JSON).
type clustersFile struct {
	Clusters     []clusterFileEntry `yaml:"clusters"`
	CrossCluster []routeFileEntry   `yaml:"cross_cluster"`
}

type clusterFileEntry struct {
	Name            string         `yaml:"name"`
	Bootstrap       string         `yaml:"bootstrap"`
	KafkaConfig     map[string]any `yaml:"kafka_config"`
	SchemaRegistry  registryEntry  `yaml:"schema_registry"`
	ErrorTopic      string         `yaml:"error_topic"`
	Sources         []string       `yaml:"sources"`
	DLTTopic        string         `yaml:"dlt_topic"`
	GroupID         string         `yaml:"group_id"`
	GroupInstanceID string         `yaml:"group_instance_id"`
}

type registryEntry struct {
	URL  string `yaml:"url"`
	Auth string `yaml:"auth"`
}

type routeFileEntry struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// maxClustersFile bounds the size of the clusters file.
const maxClustersFile = 1 << 20

// maxClusters bounds the number of configured clusters: each runs an intake and a producer.
const maxClusters = 64

// envRefRE matches a ${NAME} reference to an environment variable in a value of the file.
var envRefRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// clusterDefaults are the flags that a cluster of the file takes when it does not say.
type clusterDefaults struct {
	DLTTopic, GroupID, GroupInstanceID string
}

// readClustersFile reads and parses the clusters file at path.
func readClustersFile(path string, getenv func(string) string, def clusterDefaults) ([]clusterConfig, []resend.Route, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxClustersFile+1))
	if err != nil {
		return nil, nil, err
	}
	if len(b) > maxClustersFile {
		return nil, nil, fmt.Errorf("larger than %d bytes", maxClustersFile)
	}
	return parseClustersFile(b, getenv, def)
}

// parseClustersFile parses a clusters document (YAML, or JSON, which is YAML too) and validates
// it; its errors name the field, e.g. "clusters[1].bootstrap: is required". Values may refer to
// environment variables as ${NAME} (a password kept in a Secret, not in the ConfigMap).
func parseClustersFile(b []byte, getenv func(string) string, def clusterDefaults) ([]clusterConfig, []resend.Route, error) {
	var doc clustersFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("clusters: the file is empty; want a list of clusters")
		}
		return nil, nil, fmt.Errorf("not a clusters document: %w", shortYAMLError(err))
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	expand := func(field, v string) string {
		return envRefRE.ReplaceAllStringFunc(v, func(ref string) string {
			name := envRefRE.FindStringSubmatch(ref)[1]
			val := getenv(name)
			if val == "" {
				bad(field, "refers to ${%s}, which is not set", clipName(name))
			}
			return val
		})
	}
	if len(doc.Clusters) == 0 {
		bad("clusters", "is empty; want at least one cluster")
	}
	if len(doc.Clusters) > maxClusters {
		// The entries are not checked one by one: the one error says what to change.
		return nil, nil, fmt.Errorf("clusters: has %d entries, at most %d", len(doc.Clusters), maxClusters)
	}
	if len(doc.CrossCluster) > maxRoutes {
		return nil, nil, fmt.Errorf("cross_cluster: has %d entries, at most %d", len(doc.CrossCluster), maxRoutes)
	}
	var out []clusterConfig
	for i, e := range doc.Clusters {
		at := fmt.Sprintf("clusters[%d]", i)
		c := clusterConfig{
			Name: strings.TrimSpace(e.Name), Bootstrap: strings.TrimSpace(expand(at+".bootstrap", e.Bootstrap)),
			SchemaRegistryURL:  strings.TrimSpace(expand(at+".schema_registry.url", e.SchemaRegistry.URL)),
			SchemaRegistryAuth: expand(at+".schema_registry.auth", e.SchemaRegistry.Auth),
			ErrorTopic:         strings.TrimSpace(e.ErrorTopic), DLTTopic: strings.TrimSpace(e.DLTTopic),
			GroupID: strings.TrimSpace(e.GroupID), GroupInstanceID: strings.TrimSpace(e.GroupInstanceID),
			KafkaConfig: kafka.ConfigMap{}, origin: at,
		}
		if c.DLTTopic == "" {
			c.DLTTopic = def.DLTTopic
		}
		if c.GroupID == "" {
			c.GroupID = def.GroupID
		}
		if c.GroupInstanceID == "" {
			c.GroupInstanceID = def.GroupInstanceID
		}
		if err := store.ValidateClusterName(c.Name); err != nil {
			bad(at+".name", "%v", err)
		}
		if c.Bootstrap == "" {
			bad(at+".bootstrap", "is required")
		}
		keys := make([]string, 0, len(e.KafkaConfig))
		for k := range e.KafkaConfig {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			field := at + ".kafka_config." + k
			v := e.KafkaConfig[k]
			switch v.(type) {
			case string, bool, int, int64, uint64, float64:
			default:
				bad(field, "wants a plain value (a string, number or boolean)")
				continue
			}
			if ownedKafkaSettings[k] {
				bad(field, "is set by redrive itself")
				continue
			}
			c.KafkaConfig[k] = expand(field, fmt.Sprint(v))
		}
		if c.SchemaRegistryAuth != "" && !strings.Contains(c.SchemaRegistryAuth, ":") {
			bad(at+".schema_registry.auth", "wants user:password")
		}
		if c.SchemaRegistryAuth != "" && c.SchemaRegistryURL == "" {
			bad(at+".schema_registry.auth", "is given without schema_registry.url")
		}
		for j, spec := range e.Sources {
			s, err := intake.ParseSource(spec)
			if err != nil {
				bad(fmt.Sprintf("%s.sources[%d]", at, j), "%v", err)
				continue
			}
			c.Sources = append(c.Sources, s)
		}
		if c.DLTTopic == "" {
			bad(at+".dlt_topic", "is required (or give REDRIVE_DLT_TOPIC (-dlt-topic) for every cluster)")
		}
		if c.GroupID == "" {
			bad(at+".group_id", "is required")
		}
		errs = append(errs, c.validateTopics(at+".error_topic", at+".sources", at+".dlt_topic")...)
		out = append(out, c)
	}
	names := map[string]string{}
	for _, c := range out {
		if c.Name == "" {
			continue
		}
		if prev, ok := names[c.Name]; ok {
			bad(c.origin+".name", "%q is the name of %s too", clipName(c.Name), prev)
		}
		names[c.Name] = c.origin
	}
	var routes []resend.Route
	for i, r := range doc.CrossCluster {
		at := fmt.Sprintf("cross_cluster[%d]", i)
		r := resend.Route{From: strings.TrimSpace(r.From), To: strings.TrimSpace(r.To)}
		if r.From == "" || r.To == "" {
			bad(at, "wants from and to, the names of two clusters")
			continue
		}
		if r.From == r.To {
			bad(at, "goes from %q to itself: a failure is resent to its own cluster anyway", clipName(r.From))
			continue
		}
		routes = append(routes, r)
	}
	if len(errs) > maxFileErrors {
		errs = append(errs[:maxFileErrors], fmt.Errorf("… and %d more errors", len(errs)-maxFileErrors))
	}
	return out, routes, errors.Join(errs...)
}

// shortYAMLError returns err with at most maxFileErrors of the decoder's errors (a document
// can repeat one mistake many times), each line within 512 bytes.
func shortYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		msg := err.Error()
		if len(msg) <= 512 {
			return err
		}
		return errors.New(clip.Text(msg, 512))
	}
	lines := te.Errors
	more := 0
	if len(lines) > maxFileErrors {
		lines, more = lines[:maxFileErrors], len(lines)-maxFileErrors
	}
	var b strings.Builder
	b.WriteString("yaml: unmarshal errors:")
	for _, l := range lines {
		b.WriteString("\n  " + clip.Text(l, 512))
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n  … and %d more", more)
	}
	return errors.New(b.String())
}

// maxRoutes bounds the cross_cluster routes: one per ordered pair of clusters.
const maxRoutes = maxClusters * (maxClusters - 1)

// maxFileErrors bounds the errors a clusters file reports at once: the first ones, then how
// many more there are.
const maxFileErrors = 20

// clipName returns name, cut to 64 bytes with an ellipsis when longer: a name echoed in an
// error stays readable whatever the file holds.
func clipName(name string) string { return clip.Text(name, 64) }

// ownedKafkaSettings are the librdkafka settings that redrive sets itself.
var ownedKafkaSettings = map[string]bool{"bootstrap.servers": true, "group.id": true, "enable.auto.commit": true,
	"enable.auto.offset.store": true, "acks": true, "enable.idempotence": true}

// validateTopics checks the cluster's topics: one error topic or source at least, each topic
// read once, none the dead-letter topic. The fields name the configuration of each part.
func (c *clusterConfig) validateTopics(errorTopicField, sourcesField, dltField string) []error {
	var errs []error
	if c.ErrorTopic == "" && len(c.Sources) == 0 {
		errs = append(errs, fmt.Errorf("%s: is required (or give %s)", errorTopicField, sourcesField))
	}
	if c.ErrorTopic != "" && c.ErrorTopic == c.DLTTopic {
		errs = append(errs, fmt.Errorf("%s: is the error topic %q: a bad record would loop forever; use a topic of its own", dltField, clipName(c.ErrorTopic)))
	}
	seen := map[string]string{}
	if c.ErrorTopic != "" {
		seen[c.ErrorTopic] = "mpfe:" + c.ErrorTopic + " (" + errorTopicField + ")"
	}
	for _, src := range c.Sources {
		if prev, ok := seen[src.Topic]; ok {
			errs = append(errs, fmt.Errorf("%s: entry %q reads topic %q, which %s reads already", sourcesField, clipName(src.String()), clipName(src.Topic), clipName(prev)))
		}
		seen[src.Topic] = src.String()
		if src.Topic == c.DLTTopic {
			errs = append(errs, fmt.Errorf("%s: entry %q reads the dead-letter topic %q (%s): a bad record would loop forever", sourcesField, clipName(src.String()), clipName(c.DLTTopic), dltField))
		}
	}
	return errs
}

// validateRoutes checks that the routes name configured clusters.
func validateRoutes(routes []resend.Route, clusters []clusterConfig) []error {
	names := map[string]bool{}
	for _, c := range clusters {
		names[c.Name] = true
	}
	var errs []error
	for i, r := range routes {
		for _, n := range []string{r.From, r.To} {
			if !names[n] {
				errs = append(errs, fmt.Errorf("cross_cluster[%d]: cluster %q is not configured", i, clipName(n)))
			}
		}
	}
	return errs
}

// clusterNames returns the names of the clusters, in order.
func clusterNames(cs []clusterConfig) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// clusters returns the configured clusters; a configuration built without parseServeConfig
// (tests, the demo) that names none has the one of its flag fields.
func (c serveConfig) clusters() []clusterConfig {
	if len(c.Clusters) > 0 {
		return c.Clusters
	}
	return []clusterConfig{{
		Name: store.DefaultCluster, Bootstrap: c.KafkaBootstrap, KafkaConfig: c.KafkaConfig,
		SchemaRegistryURL: c.SchemaRegistryURL, SchemaRegistryAuth: c.SchemaRegistryAuth,
		ErrorTopic: c.ErrorTopic, Sources: c.Sources, DLTTopic: c.DLTTopic, GroupID: c.GroupID,
		GroupInstanceID: c.GroupInstanceID, origin: "REDRIVE_KAFKA_BOOTSTRAP (-kafka-bootstrap)",
	}}
}

// multiCluster reports whether the service has other clusters than the one named default.
func (c serveConfig) multiCluster() bool {
	cs := c.clusters()
	return len(cs) > 1 || cs[0].Name != store.DefaultCluster
}

// resendClusters returns the clusters of the resend scheduler: nil for the single default
// cluster (its Brokers and Producer), else one per configured cluster.
func (c serveConfig) resendClusters() []resend.Cluster {
	if !c.multiCluster() {
		return nil
	}
	var out []resend.Cluster
	for _, cl := range c.clusters() {
		out = append(out, resend.Cluster{Name: cl.Name, Brokers: cl.Bootstrap, Producer: cl.KafkaConfig})
	}
	return out
}
