package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// An existing single-cluster deployment upgrades with no change: its flags are one cluster,
// named default, with everything it had.
func TestServeConfigSingleClusterIsDefault(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"REDRIVE_DATABASE_URL": "postgres://db/redrive", "REDRIVE_KAFKA_BOOTSTRAP": "kafka:9092", "REDRIVE_ERROR_TOPIC": "errors",
		"REDRIVE_DLT_TOPIC": "errors-dlt", "REDRIVE_SOURCES": "spring:orders.DLT", "REDRIVE_KAFKA_CONFIG": "security.protocol=SASL_SSL",
		"REDRIVE_SCHEMA_REGISTRY_URL": "http://registry:8081", "REDRIVE_SCHEMA_REGISTRY_AUTH": "u:p",
	}
	var errOut bytes.Buffer
	cfg, err := parseServeConfig(nil, envMap(env), &errOut)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, errOut.String())
	}
	if len(cfg.Clusters) != 1 || cfg.multiCluster() || cfg.resendClusters() != nil {
		t.Fatalf("clusters = %+v, want the one default", cfg.Clusters)
	}
	c := cfg.Clusters[0]
	if c.Name != store.DefaultCluster || c.Bootstrap != "kafka:9092" || c.ErrorTopic != "errors" || c.DLTTopic != "errors-dlt" ||
		len(c.Sources) != 1 || c.KafkaConfig["security.protocol"] != "SASL_SSL" || c.SchemaRegistryURL != "http://registry:8081" ||
		c.SchemaRegistryAuth != "u:p" || c.GroupID != "redrive-intake" {
		t.Errorf("default cluster = %+v", c)
	}
}

const clustersYAML = `
clusters:
  - name: eu
    bootstrap: kafka-eu-1:9092,kafka-eu-2:9092
    kafka_config:
      security.protocol: SASL_SSL
      sasl.mechanism: SCRAM-SHA-512
      sasl.username: redrive
      sasl.password: ${EU_KAFKA_PASSWORD}
      socket.keepalive.enable: true
      message.max.bytes: 2000000
    schema_registry:
      url: https://registry-eu:8081
      auth: redrive:${EU_REGISTRY_PASSWORD}
    error_topic: errors
    sources:
      - spring:orders.DLT?temporality=TEMPORARY
    dlt_topic: redrive.dlt
  - name: us-east
    bootstrap: kafka-us:9092
    sources: [connect:sink.dlq=payments]
    group_id: redrive-us
cross_cluster:
  - {from: eu, to: us-east}
`

func TestClustersFile(t *testing.T) {
	t.Parallel()
	getenv := envMap(map[string]string{"EU_KAFKA_PASSWORD": "s3cret", "EU_REGISTRY_PASSWORD": "r3g"})
	def := clusterDefaults{DLTTopic: "errors-dlt", GroupID: "redrive-intake"}
	cs, routes, err := parseClustersFile([]byte(clustersYAML), getenv, def)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || len(routes) != 1 || routes[0] != (resend.Route{From: "eu", To: "us-east"}) {
		t.Fatalf("clusters %+v, routes %+v", cs, routes)
	}
	eu, us := cs[0], cs[1]
	if eu.Name != "eu" || eu.Bootstrap != "kafka-eu-1:9092,kafka-eu-2:9092" || eu.KafkaConfig["sasl.password"] != "s3cret" ||
		eu.KafkaConfig["socket.keepalive.enable"] != "true" || eu.KafkaConfig["message.max.bytes"] != "2000000" ||
		eu.SchemaRegistryURL != "https://registry-eu:8081" || eu.SchemaRegistryAuth != "redrive:r3g" || eu.ErrorTopic != "errors" ||
		len(eu.Sources) != 1 || eu.DLTTopic != "redrive.dlt" || eu.GroupID != "redrive-intake" {
		t.Errorf("eu = %+v", eu)
	}
	if us.Name != "us-east" || us.DLTTopic != "errors-dlt" || us.GroupID != "redrive-us" || len(us.Sources) != 1 || us.Sources[0].OriginalTopic != "payments" {
		t.Errorf("us-east = %+v", us)
	}

	// JSON is a clusters document too.
	cs, _, err = parseClustersFile([]byte(`{"clusters": [{"name": "a", "bootstrap": "k:9092", "error_topic": "errors"}]}`), getenv, def)
	if err != nil || len(cs) != 1 || cs[0].Name != "a" {
		t.Errorf("JSON document: %+v, %v", cs, err)
	}
}

func TestClustersFileValidation(t *testing.T) {
	t.Parallel()
	def := clusterDefaults{GroupID: "redrive-intake"}
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"empty", ``, []string{"empty"}},
		{"no clusters", `clusters: []`, []string{"clusters: is empty"}},
		{"not yaml", `clusters: [`, []string{"not a clusters document"}},
		{"unknown field", "clusters:\n  - name: a\n    bootstrp: k:9092", []string{"bootstrp"}},
		{"missing parts", "clusters:\n  - name: a\n    bootstrap: k:9092\n    error_topic: e\n    dlt_topic: d\n  - name: b", []string{
			"clusters[1].bootstrap: is required", "clusters[1].error_topic: is required (or give clusters[1].sources)",
			"clusters[1].dlt_topic: is required"}},
		{"bad name", "clusters:\n  - name: EU West\n    bootstrap: k\n    error_topic: e\n    dlt_topic: d", []string{"clusters[0].name: \"EU West\" is not a cluster name"}},
		{"no name", "clusters:\n  - bootstrap: k\n    error_topic: e\n    dlt_topic: d", []string{"clusters[0].name: is empty"}},
		{"twice", "clusters:\n  - {name: a, bootstrap: k, error_topic: e, dlt_topic: d}\n  - {name: a, bootstrap: k, error_topic: e, dlt_topic: d}",
			[]string{"clusters[1].name: \"a\" is the name of clusters[0] too"}},
		{"owned setting", "clusters:\n  - name: a\n    bootstrap: k\n    error_topic: e\n    dlt_topic: d\n    kafka_config: {group.id: x}",
			[]string{"clusters[0].kafka_config.group.id: is set by redrive itself"}},
		{"nested setting", "clusters:\n  - name: a\n    bootstrap: k\n    error_topic: e\n    dlt_topic: d\n    kafka_config: {sasl: {a: b}}",
			[]string{"clusters[0].kafka_config.sasl: wants a plain value"}},
		{"unset variable", "clusters:\n  - name: a\n    bootstrap: ${NOPE}\n    error_topic: e\n    dlt_topic: d",
			[]string{"clusters[0].bootstrap: refers to ${NOPE}, which is not set"}},
		{"registry auth", "clusters:\n  - name: a\n    bootstrap: k\n    error_topic: e\n    dlt_topic: d\n    schema_registry: {url: http://r, auth: nocolon}",
			[]string{"clusters[0].schema_registry.auth: wants user:password"}},
		{"bad source", "clusters:\n  - name: a\n    bootstrap: k\n    dlt_topic: d\n    sources: [nope:x]",
			[]string{"clusters[0].sources[0]: source \"nope:x\""}},
		{"loop", "clusters:\n  - name: a\n    bootstrap: k\n    error_topic: d\n    dlt_topic: d",
			[]string{"clusters[0].dlt_topic: is the error topic \"d\""}},
		{"route to itself", "clusters:\n  - {name: a, bootstrap: k, error_topic: e, dlt_topic: d}\ncross_cluster: [{from: a, to: a}]",
			[]string{"cross_cluster[0]: goes from \"a\" to itself"}},
		{"route half", "clusters:\n  - {name: a, bootstrap: k, error_topic: e, dlt_topic: d}\ncross_cluster: [{from: a}]",
			[]string{"cross_cluster[0]: wants from and to"}},
	}
	for _, c := range cases {
		_, _, err := parseClustersFile([]byte(c.doc), envMap(nil), def)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
	}
}

func TestServeConfigClustersFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	two := write("two.yaml", "clusters:\n  - {name: eu, bootstrap: k-eu, error_topic: errors}\n  - {name: us, bootstrap: k-us, error_topic: errors}\ncross_cluster: [{from: eu, to: us}]\n")
	base := map[string]string{"REDRIVE_DATABASE_URL": "postgres://db/redrive", "REDRIVE_DLT_TOPIC": "errors-dlt"}

	// The file alone, by its variable: its clusters, with the flags' dead-letter topic.
	var errOut bytes.Buffer
	cfg, err := parseServeConfig(nil, envMap(mergeEnv(base, "REDRIVE_CLUSTERS_FILE", two)), &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if got := clusterNames(cfg.Clusters); len(got) != 2 || got[0] != "eu" || got[1] != "us" || cfg.Clusters[1].DLTTopic != "errors-dlt" ||
		len(cfg.CrossCluster) != 1 || len(cfg.resendClusters()) != 2 || !cfg.multiCluster() {
		t.Errorf("clusters %+v, routes %+v", cfg.Clusters, cfg.CrossCluster)
	}

	// With -kafka-bootstrap, the flags' cluster comes first, named default.
	withFlags := mergeEnv(mergeEnv(base, "REDRIVE_KAFKA_BOOTSTRAP", "k-main"), "REDRIVE_ERROR_TOPIC", "errors")
	cfg, err = parseServeConfig([]string{"-clusters-file", two}, envMap(withFlags), &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if got := clusterNames(cfg.Clusters); len(got) != 3 || got[0] != store.DefaultCluster || cfg.Clusters[0].Bootstrap != "k-main" {
		t.Errorf("clusters %v", got)
	}

	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"missing file", base, []string{"-clusters-file", filepath.Join(dir, "none.yaml")},
			[]string{"REDRIVE_CLUSTERS_FILE (-clusters-file)", "none.yaml"}},
		{"default twice", withFlags, []string{"-clusters-file", write("def.yaml", "clusters:\n  - {name: default, bootstrap: k, error_topic: e}\n")},
			[]string{"clusters[0].name: \"default\" is the cluster of REDRIVE_KAFKA_BOOTSTRAP"}},
		{"route to nowhere", base, []string{"-clusters-file", write("route.yaml", "clusters:\n  - {name: a, bootstrap: k, error_topic: e}\ncross_cluster: [{from: a, to: b}]\n")},
			[]string{"cross_cluster[0]: cluster \"b\" is not configured"}},
		{"topics without bootstrap", mergeEnv(base, "REDRIVE_ERROR_TOPIC", "errors"), []string{"-clusters-file", two},
			[]string{"REDRIVE_ERROR_TOPIC (-error-topic) and REDRIVE_SOURCES (-source) are topics of the cluster of REDRIVE_KAFKA_BOOTSTRAP"}},
		{"bad field", base, []string{"-clusters-file", write("bad.yaml", "clusters:\n  - {name: a, error_topic: e}\n")},
			[]string{"clusters[0].bootstrap: is required"}},
		{"neither", base, nil, []string{"REDRIVE_KAFKA_BOOTSTRAP (-kafka-bootstrap) is required (or give REDRIVE_CLUSTERS_FILE (-clusters-file))"}},
	}
	for _, c := range cases {
		var errOut bytes.Buffer
		if _, err := parseServeConfig(c.args, envMap(c.env), &errOut); err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%s: stderr %q does not say %q", c.name, errOut.String(), w)
			}
		}
	}
}

// FuzzClustersFile: any document gives clusters or an error, never a panic.
func FuzzClustersFile(f *testing.F) {
	f.Add([]byte(clustersYAML))
	f.Add([]byte(`{"clusters": [{"name": "a", "bootstrap": "k", "error_topic": "e", "dlt_topic": "d"}]}`))
	f.Add([]byte("clusters:\n  - name: a\n    kafka_config: {x: [1, 2]}"))
	f.Add([]byte("clusters: [" + strings.Repeat("{},", 2*maxClusters) + "]"))
	f.Add([]byte("clusters:\n- name: a\n  bootstrap: ${" + strings.Repeat("A", 500) + "}\n  dlt_topic: d\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		cs, _, err := parseClustersFile(doc, envMap(map[string]string{"EU_KAFKA_PASSWORD": "p", "EU_REGISTRY_PASSWORD": "q"}), clusterDefaults{GroupID: "g"})
		if err == nil {
			for _, c := range cs {
				if store.ValidateClusterName(c.Name) != nil || c.Bootstrap == "" || c.DLTTopic == "" {
					t.Fatalf("accepted %+v", c)
				}
			}
			return
		}
		checkClustersFileError(t, err)
	})
}

// checkClustersFileError fails t unless err reads well: each line names the field at fault
// (or says the document is not one), and the whole stays short whatever the file holds.
func checkClustersFileError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if len(msg) > 16<<10 {
		t.Fatalf("error of %d bytes: %.200s…", len(msg), msg)
	}
	if strings.HasPrefix(msg, "not a clusters document: ") {
		return
	}
	for _, line := range strings.Split(msg, "\n") {
		if !strings.HasPrefix(line, "clusters") && !strings.HasPrefix(line, "cross_cluster") && !strings.HasPrefix(line, "… and ") {
			t.Fatalf("error line %q names no field (in %q)", line, msg)
		}
	}
}

// A file of many clusters gets one error saying how many it may have, not one per entry, and
// a long name is clipped where an error repeats it.
func TestClustersFileErrorsStayShort(t *testing.T) {
	for _, doc := range []string{
		"clusters: [" + strings.Repeat("{},", 100000) + "]",
		"clusters:\n- {name: a, dlt_topic: d, error_topic: e}\ncross_cluster: [" + strings.Repeat("{from: a, to: b},", 5000) + "]",
		"clusters: [" + strings.Repeat("{name: x},", maxClusters) + "]",
		"clusters:\n- name: a\n  bootstrap: ${" + strings.Repeat("A", 100000) + "}\n  dlt_topic: d\n  error_topic: e\n",
	} {
		_, _, err := parseClustersFile([]byte(doc), envMap(nil), clusterDefaults{GroupID: "g"})
		if err == nil {
			t.Fatalf("accepted %.80s…", doc)
		}
		checkClustersFileError(t, err)
		if len(err.Error()) > 4<<10 {
			t.Errorf("error of %d bytes for %.40s…: %.300s", len(err.Error()), doc, err)
		}
	}
	_, _, err := parseClustersFile([]byte("clusters: ["+strings.Repeat("{},", 100)+"]"), envMap(nil), clusterDefaults{GroupID: "g"})
	if err == nil || err.Error() != "clusters: has 100 entries, at most 64" {
		t.Errorf("too many clusters: %v", err)
	}
}
