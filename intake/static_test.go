package intake

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/redrive/redrive/avro"
)

// With a GroupInstanceID the intake's consumer joins its group as a static member under that
// id (so that a restarted instance takes its partitions back at once) and stores as usual.
func TestIntakeStaticMembership(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.GroupInstanceID = "redrive-0" })
	ev := event(avro.Permanent)
	e.produce(e.encode(ev))
	e.start()
	e.waitFor("offsets committed", e.committedAll)
	if n := e.rows(); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka.Bootstrap()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{e.group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("describe group: %v", err)
	}
	var ids []string
	for _, m := range resp.Groups[0].Members {
		if m.InstanceID != nil {
			ids = append(ids, *m.InstanceID)
		}
	}
	if len(ids) != 1 || ids[0] != "redrive-0" {
		t.Errorf("group members' instance ids = %v, want [redrive-0]", ids)
	}
}
