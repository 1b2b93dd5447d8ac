package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/store"
)

// New refuses a config it cannot run with, naming what is wrong.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	st := &store.Store{}
	for name, tt := range map[string]struct {
		cfg  jobs.Config
		want string
	}{
		"no store":           {jobs.Config{Owner: "a"}, "Store is required"},
		"no owner":           {jobs.Config{Store: st}, "Owner is required"},
		"negative lease":     {jobs.Config{Store: st, Owner: "a", Lease: -time.Second}, "must not be negative"},
		"negative batches":   {jobs.Config{Store: st, Owner: "a", MaxBatches: -1}, "must not be negative"},
		"heartbeat too slow": {jobs.Config{Store: st, Owner: "a", Lease: time.Second, Heartbeat: time.Second}, "a third of Lease"},
	} {
		if _, err := jobs.New(tt.cfg); err == nil || !strings.Contains(err.Error(), "invalid config: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an invalid config error saying %q", name, err, tt.want)
		}
	}
	if _, err := jobs.New(jobs.Config{Store: st, Owner: "a"}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
