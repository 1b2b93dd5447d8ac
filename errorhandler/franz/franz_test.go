package franz

import (
	"context"
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
	if _, err := New(cfg, Settings{Brokers: []string{"localhost:1"}, GroupInstanceID: " orders-0"}); err == nil || !strings.Contains(err.Error(), "GroupInstanceID") {
		t.Errorf("a spaced GroupInstanceID: %v", err)
	}
	_, err := NewDeadLetterer(errorhandler.DeadLetterConfig{ErrorTopic: "e", System: "s", Service: "svc", GroupID: "g", Metrics: prometheus.NewRegistry()},
		Settings{Brokers: []string{"localhost:1"}, ProducerOpts: []kgo.Opt{kgo.DisableIdempotentWrite()}})
	if err == nil || !strings.Contains(err.Error(), "idempotent") {
		t.Errorf("a producer without idempotence: %v", err)
	}
}
