package errorhandler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	eh "github.com/redrive/redrive/errorhandler"
)

func TestConfigValidation(t *testing.T) {
	ok := func() eh.Config[[]byte, []byte] {
		return eh.Config[[]byte, []byte]{
			GroupID: "g", Topics: []string{"t"}, System: "s", Service: "svc",
			ValueDecoder: eh.Bytes(), Metrics: prometheus.NewRegistry(),
			Handler: eh.HandlerFunc[[]byte, []byte](func(context.Context, eh.Record[[]byte, []byte]) error { return nil }),
		}
	}
	cfg := ok()
	if err := cfg.SetDefaults(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if cfg.DeadLetter.GroupID != "g" || cfg.DeadLetter.Service != "svc" || cfg.Retry.Backoff != eh.DefaultInPlaceBackoff || cfg.FloodThreshold != eh.DefaultFloodThreshold {
		t.Errorf("defaults not filled: %+v", cfg)
	}
	for name, mutate := range map[string]func(*eh.Config[[]byte, []byte]){
		"no group":             func(c *eh.Config[[]byte, []byte]) { c.GroupID = "" },
		"no topics":            func(c *eh.Config[[]byte, []byte]) { c.Topics = nil },
		"no service":           func(c *eh.Config[[]byte, []byte]) { c.Service = "" },
		"no decoder":           func(c *eh.Config[[]byte, []byte]) { c.ValueDecoder = nil },
		"no handler":           func(c *eh.Config[[]byte, []byte]) { c.Handler = nil },
		"dead letter no topic": func(c *eh.Config[[]byte, []byte]) { c.ProcessPolicy = eh.DeadLetter },
		"bad policy":           func(c *eh.Config[[]byte, []byte]) { c.DecodePolicy = eh.Policy(9) },
		"negative":             func(c *eh.Config[[]byte, []byte]) { c.CommitInterval = -1 },
		"negative retry":       func(c *eh.Config[[]byte, []byte]) { c.Retry.Attempts = -1 },
		"dead letter backoff": func(c *eh.Config[[]byte, []byte]) {
			c.DeadLetter = eh.DeadLetterConfig{ErrorTopic: "e", RetryBackoff: -1}
		},
	} {
		cfg := ok()
		mutate(&cfg)
		if err := cfg.SetDefaults(); err == nil || !strings.Contains(err.Error(), "invalid config") {
			t.Errorf("%s: SetDefaults = %v, want an invalid config error", name, err)
		}
	}
	var dl eh.DeadLetterConfig
	if err := dl.SetDefaults(); err == nil || !strings.Contains(err.Error(), "ErrorTopic is empty") || !strings.Contains(err.Error(), "GroupID is empty") {
		t.Errorf("an empty DeadLetterConfig: %v", err)
	}
}
