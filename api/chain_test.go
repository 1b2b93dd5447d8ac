package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
)

// chainView is the part of a failure detail that shows its ordering-guard chain.
type chainView struct {
	ParkedChain *struct {
		Head *struct {
			ID     uuid.UUID `json:"id"`
			Offset string    `json:"offset"`
			Href   string    `json:"href"`
		} `json:"head"`
		Parked []struct {
			ID     uuid.UUID `json:"id"`
			Offset string    `json:"offset"`
		} `json:"parked"`
	} `json:"parked_chain"`
}

// seedChain stores a head of key at offset base and n failures parked behind it, each with its
// own value, and returns the head's id and the parked ids in offset order.
func seedChain(e *env, key string, base int64, n int) (uuid.UUID, []uuid.UUID) {
	e.t.Helper()
	head := e.insert(row{Topic: "orders", Partition: 1, Offset: base, Key: []byte(key), Causing: "orders/1/" + key,
		ErrorCode: "PROCESSING_FAILED", Value: []byte(key + "-head")})
	var parked []uuid.UUID
	// Inserted in reverse: the chain is ordered by offset, not by arrival.
	for i := n; i >= 1; i-- {
		parked = append([]uuid.UUID{e.insert(row{Topic: "orders", Partition: 1, Offset: base + int64(i), Key: []byte(key),
			Causing: key + "-p" + string(rune('0'+i)), ErrorCode: avro.CodeParkedBehind, ParkedHead: "orders/1/" + key,
			Value: []byte(key + "-p" + string(rune('0'+i)))})}, parked...)
	}
	return head, parked
}

// The detail shows the chain: a head lists its parked failures in offset order, a parked
// failure names its head; a failure of another key is in no chain. Retrying the head resends
// it, then its parked failures in offset order; closing a head with release resends its parked
// failures in order, each carrying redrive-release = the head's causing message.
func TestParkedChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	head, parked := seedChain(e, "k1", 10, 2)
	other := e.insert(row{Topic: "orders", Partition: 1, Offset: 11, Key: []byte("k2")})

	var v chainView
	e.do("GET", "/api/v1/failures/"+head.String(), viewerToken, nil).json(t, &v)
	if v.ParkedChain == nil || v.ParkedChain.Head == nil || v.ParkedChain.Head.ID != head ||
		len(v.ParkedChain.Parked) != 2 || v.ParkedChain.Parked[0].ID != parked[0] || v.ParkedChain.Parked[1].ID != parked[1] ||
		v.ParkedChain.Parked[0].Offset != "11" {
		t.Fatalf("head's chain = %+v", v.ParkedChain)
	}
	v = chainView{}
	e.do("GET", "/api/v1/failures/"+parked[1].String(), viewerToken, nil).json(t, &v)
	if v.ParkedChain == nil || v.ParkedChain.Head == nil || v.ParkedChain.Head.ID != head ||
		v.ParkedChain.Head.Href != "/api/v1/failures/"+head.String() {
		t.Fatalf("parked failure's chain = %+v", v.ParkedChain)
	}
	v = chainView{}
	e.do("GET", "/api/v1/failures/"+other.String(), viewerToken, nil).json(t, &v)
	if v.ParkedChain != nil {
		t.Errorf("another key's chain = %+v, want null", v.ParkedChain)
	}

	// Retrying the head resends it, then the parked failures in offset order.
	var out struct {
		Outcome string `json:"outcome"`
		Parked  []struct {
			ID      uuid.UUID `json:"id"`
			Outcome string    `json:"outcome"`
		} `json:"parked"`
	}
	r := e.do("POST", "/api/v1/failures/"+head.String()+"/retry", operatorToken, `{"reason": "fixed"}`)
	r.json(t, &out)
	if r.status != 200 || out.Outcome != "resent" || len(out.Parked) != 2 || out.Parked[0].ID != parked[0] || out.Parked[1].Outcome != "resent" {
		t.Fatalf("retry head = %d %s", r.status, r.body)
	}
	for _, id := range append([]uuid.UUID{head}, parked...) {
		if st := e.state(id); st != redrive.StateResent {
			t.Errorf("%s after the retry: %s", id, st)
		}
	}
	msgs := e.cluster.ConsumeN(t, "orders", 3, 30*time.Second)
	for i, want := range []string{"k1-head", "k1-p1", "k1-p2"} {
		if got := string(msgs[i].Value); got != want {
			t.Errorf("resend %d = %q, want %q", i, got, want)
		}
		for _, h := range msgs[i].Headers {
			if h.Key == avro.HeaderRelease {
				t.Errorf("a retry's resend %d carries %s", i, avro.HeaderRelease)
			}
		}
	}

	// Release needs a close; a close with release of a head closes it and resends its chain.
	if r = e.do("POST", "/api/v1/failures/"+head.String()+"/retry", operatorToken, `{"release": true}`); r.status != 400 {
		t.Errorf("retry with release = %d %s", r.status, r.body)
	}
	head2, parked2 := seedChain(e, "k3", 20, 2)
	r = e.do("POST", "/api/v1/failures/"+head2.String()+"/close", operatorToken, `{"reason": "given up", "release": true}`)
	out.Parked = nil
	r.json(t, &out)
	if r.status != 200 || out.Outcome != "closed" || len(out.Parked) != 2 || out.Parked[0].ID != parked2[0] || out.Parked[1].ID != parked2[1] {
		t.Fatalf("close with release = %d %s", r.status, r.body)
	}
	if st := e.state(head2); st != redrive.StateClosed {
		t.Errorf("head after close with release: %s", st)
	}
	msgs = e.cluster.ConsumeN(t, "orders", 5, 30*time.Second)[3:]
	for i, want := range []string{"k3-p1", "k3-p2"} {
		release := headerOf(msgs[i].Headers, avro.HeaderRelease)
		if got := string(msgs[i].Value); got != want || release != "orders/1/k3" {
			t.Errorf("release resend %d = %q with %s %q, want %q with the head's causing message", i, got, avro.HeaderRelease, release, want)
		}
	}
	// A record parked after its head was closed: its retry carries the release too.
	late := e.insert(row{Topic: "orders", Partition: 1, Offset: 25, Key: []byte("k3"), Causing: "k3-late",
		ErrorCode: avro.CodeParkedBehind, Value: []byte("k3-late"), ParkedHead: "orders/1/k3"})
	if r = e.do("POST", "/api/v1/failures/"+late.String()+"/retry", operatorToken, nil); r.status != 200 {
		t.Fatalf("retry of a record parked behind a closed head = %d %s", r.status, r.body)
	}
	m := e.cluster.ConsumeN(t, "orders", 6, 30*time.Second)[5]
	if release := headerOf(m.Headers, avro.HeaderRelease); string(m.Value) != "k3-late" || release != "orders/1/k3" {
		t.Errorf("late parked resend %q with release %q", m.Value, release)
	}
	// A close without release leaves the chain alone.
	head3, parked3 := seedChain(e, "k4", 30, 1)
	if r = e.do("POST", "/api/v1/failures/"+head3.String()+"/close", operatorToken, `{"reason": "r"}`); r.status != 200 {
		t.Fatalf("close = %d %s", r.status, r.body)
	}
	if st := e.state(parked3[0]); st != redrive.StatePermanent {
		t.Errorf("parked failure after a plain close of its head: %s", st)
	}
}

// headerOf returns the value of the last header named name, "" when none is.
func headerOf(hs []kafka.Header, name string) string {
	v := ""
	for _, h := range hs {
		if h.Key == name {
			v = string(h.Value)
		}
	}
	return v
}

// A bulk retry follows the ordering chains of the heads it resends: by ids, with a follower
// of one head in the selection too, every follower is resent once, after its head, in offset
// order; the follower of the selection counts in counts, the others in parked_counts.
func TestBulkRetryFollowsChains(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h1, p1 := seedChain(e, "b1", 10, 2)
	h2, p2 := seedChain(e, "b2", 20, 1)
	var out struct {
		Matched      int            `json:"matched"`
		Counts       map[string]int `json:"counts"`
		ParkedCounts map[string]int `json:"parked_counts"`
	}
	body := `{"ids": ["` + p1[1].String() + `", "` + h1.String() + `", "` + h2.String() + `"], "reason": "fixed"}`
	r := e.do("POST", "/api/v1/failures/retry", operatorToken, body)
	r.json(t, &out)
	if r.status != 200 || out.Matched != 3 || out.Counts["resent"] != 3 || out.ParkedCounts["resent"] != 2 {
		t.Fatalf("bulk retry = %d %s", r.status, r.body)
	}
	for _, id := range append(append([]uuid.UUID{h1, h2}, p1...), p2...) {
		if st := e.state(id); st != redrive.StateResent {
			t.Errorf("%s after the bulk retry: %s", id, st)
		}
	}
	checkChainOrder(t, e.cluster.ConsumeN(t, "orders", 5, 30*time.Second), map[string][]string{
		"b1": {"b1-head", "b1-p1", "b1-p2"}, "b2": {"b2-head", "b2-p1"}})
}

// A retry of a group (a bulk retry by filter) follows the chains of the group's heads: their
// followers, of another group, are resent once each, after their head, in offset order.
func TestGroupRetryFollowsChains(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h1, p1 := seedChain(e, "g1", 10, 2)
	_, p2 := seedChain(e, "g2", 20, 2)
	var group int64
	if err := e.pool.QueryRow(context.Background(), `SELECT group_id FROM failures WHERE id = $1`, h1).Scan(&group); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Matched      int            `json:"matched"`
		Counts       map[string]int `json:"counts"`
		ParkedCounts map[string]int `json:"parked_counts"`
	}
	r := e.do("POST", "/api/v1/failures/retry", operatorToken, fmt.Sprintf(`{"filter": {"group_id": %d}, "reason": "fixed"}`, group))
	r.json(t, &out)
	if r.status != 200 || out.Matched != 2 || out.Counts["resent"] != 2 || out.ParkedCounts["resent"] != 4 {
		t.Fatalf("group retry = %d %s", r.status, r.body)
	}
	for _, id := range append(p1, p2...) {
		if st := e.state(id); st != redrive.StateResent {
			t.Errorf("follower %s after the group retry: %s", id, st)
		}
	}
	checkChainOrder(t, e.cluster.ConsumeN(t, "orders", 6, 30*time.Second), map[string][]string{
		"g1": {"g1-head", "g1-p1", "g1-p2"}, "g2": {"g2-head", "g2-p1", "g2-p2"}})
	if got := e.cluster.EndOffsets("orders"); sum(got) != 6 {
		t.Errorf("%d records on the topic, want 6 (each once)", sum(got))
	}
}

func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// checkChainOrder checks that the records of each key (by the value's prefix before "-")
// arrived in the order want gives, each once.
func checkChainOrder(t *testing.T, msgs []*kafka.Message, want map[string][]string) {
	t.Helper()
	got := map[string][]string{}
	for _, m := range msgs {
		v := string(m.Value)
		if i := strings.IndexByte(v, '-'); i > 0 {
			got[v[:i]] = append(got[v[:i]], v)
		}
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("records of %s: %v, want %v", k, got[k], w)
		}
	}
}
