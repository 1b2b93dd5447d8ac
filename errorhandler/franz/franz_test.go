package franz

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/errorhandler"
)

// TestHeaderLayout: headers are handed over without copying, which needs the same layout.
func TestHeaderLayout(t *testing.T) {
	var k kgo.RecordHeader
	var h errorhandler.Header
	if unsafe.Sizeof(k) != unsafe.Sizeof(h) || unsafe.Offsetof(k.Key) != unsafe.Offsetof(h.Key) || unsafe.Offsetof(k.Value) != unsafe.Offsetof(h.Value) {
		t.Fatal("kgo.RecordHeader and errorhandler.Header differ in layout")
	}
	m := Message(&kgo.Record{Topic: "t", Partition: 2, Offset: 9, Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b"}}})
	if m.Topic != "t" || m.Partition != 2 || m.Offset != 9 || len(m.Headers) != 2 || m.Headers[0].Key != "a" || string(m.Headers[0].Value) != "1" || m.Headers[1].Value != nil {
		t.Errorf("message %+v", m)
	}
	if Record(&m) == nil {
		t.Error("Record lost the raw record")
	}
}

func TestSettingsValidation(t *testing.T) {
	cfg := errorhandler.Config[[]byte, []byte]{
		GroupID: "g", Topics: []string{"t"}, System: "s", Service: "svc", ValueDecoder: errorhandler.Bytes(),
		Handler: errorhandler.HandlerFunc[[]byte, []byte](func(context.Context, errorhandler.Record[[]byte, []byte]) error { return nil }),
		Metrics: prometheus.NewRegistry(),
	}
	if _, err := New(cfg, Settings{Brokers: []string{"localhost:1"}}); err != nil {
		t.Fatalf("valid: %v", err)
	}
	if _, err := New(cfg, Settings{}); err == nil || !strings.Contains(err.Error(), "invalid settings") {
		t.Errorf("no brokers: %v", err)
	}
	_, err := NewDeadLetterer(errorhandler.DeadLetterConfig{ErrorTopic: "e", System: "s", Service: "svc", GroupID: "g", Metrics: prometheus.NewRegistry()},
		Settings{Brokers: []string{"localhost:1"}, ProducerOpts: []kgo.Opt{kgo.DisableIdempotentWrite()}})
	if err == nil || !strings.Contains(err.Error(), "idempotent") {
		t.Errorf("a producer without idempotence: %v", err)
	}
}

// TestBuildsWithoutCgo checks what a franz-go user links: the adapter builds with
// CGO_ENABLED=0, and nothing it imports is the cgo client of confluent-kafka-go (the kafka
// package and librdkafka). The only confluent-kafka-go packages allowed are the pure-Go schema
// registry client (used by package avro for the Confluent wire format).
func TestBuildsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	env := append(os.Environ(), "CGO_ENABLED=0")
	list := exec.Command(goTool, "list", "-deps", "github.com/redrive/redrive/errorhandler/franz")
	list.Env = env
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/confluentinc/confluent-kafka-go/") &&
			!strings.HasPrefix(pkg, "github.com/confluentinc/confluent-kafka-go/v2/schemaregistry") {
			t.Errorf("the franz adapter imports %s", pkg)
		}
		if pkg == "C" || strings.Contains(pkg, "librdkafka") {
			t.Errorf("the franz adapter needs cgo: %s", pkg)
		}
	}
	build := exec.Command(goTool, "build", "-o", os.DevNull, "github.com/redrive/redrive/errorhandler/franz")
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}
