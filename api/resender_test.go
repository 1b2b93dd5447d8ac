package api_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
)

// Retry through the API with the real resender: the original record reaches its topic byte
// for byte, the failure is RESENT, and the resender writes the audit entry.
func TestRetryWithResender(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cluster := e.cluster
	ctx := t.Context()

	key, value := []byte("order-1"), []byte{0x00, 0x01, 0xfe, 0xff}
	id := e.insert(row{Key: key, Value: value, HeaderNames: []string{"trace", "empty"}, HeaderValues: [][]byte{[]byte("t-1"), nil}})
	closed := e.insert(row{State: redrive.StateClosed})
	r := e.do("POST", "/api/v1/failures/"+id.String()+"/retry", operatorToken, `{"reason": "consumer fixed"}`)
	if r.status != 200 {
		t.Fatalf("retry = %d %s", r.status, r.body)
	}
	if e.state(id) != redrive.StateResent {
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
		principal != "token:otto" || reason != "consumer fixed" {
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
	e.stopResender()
	if r = e.do("POST", "/api/v1/failures/"+e.insert(row{}).String()+"/retry", operatorToken, nil); r.status != 503 {
		t.Errorf("retry after shutdown = %d %s", r.status, r.body)
	}
}
