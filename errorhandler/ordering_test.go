package errorhandler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	eh "github.com/redrive/redrive/errorhandler"
)

// memStore is an OrderingStore in memory (enough for validation).
type memStore struct{}

func (memStore) Load(context.Context, string, int32) (map[string][]byte, error)  { return nil, nil }
func (memStore) Save(context.Context, string, int32, ...eh.OrderingRecord) error { return nil }

func TestOrderingValidation(t *testing.T) {
	ok := func() eh.Config[[]byte, []byte] {
		return eh.Config[[]byte, []byte]{
			GroupID: "g", Topics: []string{"t"}, System: "s", Service: "svc",
			ValueDecoder: eh.Bytes(), Metrics: prometheus.NewRegistry(),
			Handler:       eh.HandlerFunc[[]byte, []byte](func(context.Context, eh.Record[[]byte, []byte]) error { return nil }),
			ProcessPolicy: eh.DeadLetter,
			DeadLetter:    eh.DeadLetterConfig{ErrorTopic: "errors"},
			Ordering:      eh.Ordering{Topics: []string{"t"}, Store: memStore{}},
		}
	}
	cfg := ok()
	if err := cfg.SetDefaults(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if cfg.Ordering.MaxParked != eh.DefaultMaxParked || cfg.Ordering.AtLimit != eh.OrderingHalt {
		t.Errorf("defaults not filled: %+v", cfg.Ordering)
	}
	if !cfg.Ordering.Guards("t") || cfg.Ordering.Guards("u") {
		t.Errorf("Guards: wrong topics")
	}
	off := ok()
	off.Ordering = eh.Ordering{}
	off.ProcessPolicy = eh.Skip
	if err := off.SetDefaults(); err != nil || off.Ordering.Enabled() {
		t.Errorf("the zero Ordering: %v, enabled %v", err, off.Ordering.Enabled())
	}
	for name, tc := range map[string]struct {
		mutate func(*eh.Config[[]byte, []byte])
		want   string
	}{
		"unknown topic": {func(c *eh.Config[[]byte, []byte]) { c.Ordering.Topics = []string{"x"} }, `"x" is not one of Topics`},
		"no store":      {func(c *eh.Config[[]byte, []byte]) { c.Ordering.Store = nil }, "Ordering.Store is nil"},
		"skip policy":   {func(c *eh.Config[[]byte, []byte]) { c.ProcessPolicy = eh.Skip }, "ProcessPolicy DeadLetter"},
		"negative":      {func(c *eh.Config[[]byte, []byte]) { c.Ordering.MaxParked = -1 }, "MaxParked must not be negative"},
		"bad policy":    {func(c *eh.Config[[]byte, []byte]) { c.Ordering.AtLimit = 7 }, "unknown policy"},
	} {
		cfg := ok()
		tc.mutate(&cfg)
		if err := cfg.SetDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: SetDefaults = %v, want an error with %q", name, err, tc.want)
		}
	}
	if eh.OrderingHalt.String() != "halt" || eh.OrderingParkAll.String() != "park-all" {
		t.Errorf("policy names: %s, %s", eh.OrderingHalt, eh.OrderingParkAll)
	}
}
