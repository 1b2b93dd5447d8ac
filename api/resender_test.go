package api_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/store"
)

// Retry through the API with the real resender: the original record reaches its topic byte
// for byte, the failure is RESENT, and the resender writes the audit entry.
func TestRetryWithResender(t *testing.T) {
	t.Parallel()
	cluster := testkit.Kafka(t)
	cluster.CreateTopic(t, "orders", 1)
	var sched *resend.Scheduler
	e := newEnv(t, func(c *api.Config) {
		var err error
		sched, err = resend.New(resend.Config{
			Store: c.Store, Brokers: cluster.Bootstrap(), ServiceName: "redrive-api-test",
			Interval: -1, Housekeeping: resend.HousekeepingConfig{Interval: -1}, SendTimeout: 10 * time.Second,
			Producer: kafka.ConfigMap{"log_level": 3}, Registerer: prometheus.NewRegistry(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Resender = api.NewResender(sched.Resender())
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	key, value := []byte("order-1"), []byte{0x00, 0x01, 0xfe, 0xff}
	id := e.insert(row{Key: key, Value: value, HeaderNames: []string{"trace", "empty"}, HeaderValues: [][]byte{[]byte("t-1"), nil}})
	closed := e.insert(row{State: store.StateClosed})
	r := e.do("POST", "/api/v1/failures/"+id.String()+"/retry", operatorToken, `{"reason": "consumer fixed"}`)
	if r.status != 200 {
		t.Fatalf("retry = %d %s", r.status, r.body)
	}
	if e.state(id) != store.StateResent {
		t.Errorf("state after retry = %s", e.state(id))
	}
	msgs := cluster.ConsumeN(t, "orders", 1, 30*time.Second)
	m := msgs[0]
	if !bytes.Equal(m.Key, key) || !bytes.Equal(m.Value, value) {
		t.Errorf("resent key %q value %x", m.Key, m.Value)
	}
	headers := map[string]string{}
	for _, h := range m.Headers {
		headers[h.Key] = string(h.Value)
	}
	if headers["trace"] != "t-1" || headers[avro.HeaderTargetService] != "order-service" || headers[avro.HeaderErrorHandlingService] != "redrive-api-test" {
		t.Errorf("resent headers = %v", m.Headers)
	}
	var principal, reason string
	if err := e.pool.QueryRow(ctx, "SELECT principal, reason FROM audit_log WHERE failure_id = $1 AND action = 'retry'", id).Scan(&principal, &reason); err != nil ||
		principal != "otto" || reason != "consumer fixed" {
		t.Errorf("audit: %q %q (%v)", principal, reason, err)
	}
	if r = e.do("POST", "/api/v1/failures/"+closed.String()+"/retry", operatorToken, nil); r.status != 409 {
		t.Errorf("retry CLOSED = %d %s", r.status, r.body)
	}

	// A bulk retry by filter resends every match.
	for range 3 {
		e.insert(row{Topic: "orders", ErrorCode: "BULK"})
	}
	r = e.do("POST", "/api/v1/failures/retry", operatorToken, map[string]any{"filter": map[string]any{"error_code": "BULK"}})
	var v bulkView
	r.json(t, &v)
	if r.status != 200 || v.Counts["resent"] != 3 || len(v.Errors) != 0 {
		t.Fatalf("bulk retry = %d %s", r.status, r.body)
	}
	cluster.ConsumeN(t, "orders", 4, 30*time.Second)

	// Once the scheduler stopped, retries answer 503.
	cancel()
	<-done
	done <- nil
	if r = e.do("POST", "/api/v1/failures/"+e.insert(row{}).String()+"/retry", operatorToken, nil); r.status != 503 {
		t.Errorf("retry after shutdown = %d %s", r.status, r.body)
	}
}
