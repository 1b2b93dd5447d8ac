package web

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
)

// The failure page shows the ordering chain of its key with links (escaped), offers a close
// with release on a head, and the close with release resends the parked failures in order
// with the release header.
func TestParkedChainPage(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, fixtureOptions{resend: true})
	key := []byte("k<1>")
	head := testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "orders", Partition: 0, Offset: 100, Key: key,
		Causing: "orders/0/<100>", ErrorCode: "PROCESSING_FAILED", Value: []byte("head")})
	var parked []uuid.UUID
	for i, v := range []string{"p1", "p2"} {
		parked = append(parked, testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "orders", Partition: 0, Offset: 101 + int64(i),
			Key: key, Causing: "c-" + v, ErrorCode: avro.CodeParkedBehind, Value: []byte(v), ParkedHead: "orders/0/<100>"}))
	}
	op := f.client()
	op.login(operatorToken)

	resp, body := op.do("GET", "/failures/"+head.String(), nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="parked-chain"`) ||
		!strings.Contains(body, `<a href="/failures/`+parked[0].String()+`">open</a>`) ||
		strings.Index(body, parked[0].String()) > strings.Index(body, parked[1].String()) ||
		!strings.Contains(body, `id="close-release"`) {
		t.Fatalf("head page: %d %s", resp.StatusCode, body)
	}
	resp, body = op.do("GET", "/failures/"+parked[1].String(), nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="parked-head">Parked behind <a href="/failures/`+head.String()+`"`) ||
		strings.Contains(body, `id="close-release"`) {
		t.Fatalf("parked page: %d %s", resp.StatusCode, body)
	}

	tok := op.csrf("/failures/" + head.String())
	resp, body = op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"close"}, "release": {"true"}, "id": {head.String()}})
	if resp.StatusCode != 200 || !strings.Contains(body, `id="parked-note"`) || !strings.Contains(body, `name="release" value="true"`) {
		t.Fatalf("confirm with release: %d %s", resp.StatusCode, body)
	}
	resp, _ = op.do("POST", "/failures/close", url.Values{"csrf": {tok}, "release": {"true"}, "id": {head.String()}, "reason": {"given up"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("close with release: %d", resp.StatusCode)
	}
	if _, body = op.do("GET", resp.Header.Get("Location"), nil); !strings.Contains(body, `<strong id="parked-count">2</strong>`) {
		t.Errorf("result page: %s", body)
	}
	if st := f.state(head); st != redrive.StateClosed {
		t.Errorf("head: %s", st)
	}
	// A record parked after the head was closed: its retry's confirmation says it carries the
	// release.
	late := testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "orders", Partition: 0, Offset: 110,
		Key: key, Causing: "c-late", ErrorCode: avro.CodeParkedBehind, Value: []byte("late"), ParkedHead: "orders/0/<100>"})
	resp, body = op.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"retry"}, "id": {late.String()}})
	if resp.StatusCode != 200 || !strings.Contains(body, `id="release-note">This failure is parked behind <a href="/failures/`+head.String()+`"`) {
		t.Fatalf("confirm of a late parked failure: %d %s", resp.StatusCode, body)
	}
	msgs := f.kafka.ConsumeN(t, "orders", 2, 30*time.Second)
	for i, want := range []string{"p1", "p2"} {
		var release string
		for _, h := range msgs[i].Headers {
			if h.Key == avro.HeaderRelease {
				release = string(h.Value)
			}
		}
		if string(msgs[i].Value) != want || release != "orders/0/<100>" {
			t.Errorf("resend %d: %q with release %q", i, msgs[i].Value, release)
		}
	}
}

// A retry of several failures from the list follows the chains of the heads among them: the
// failures parked behind them are resent after their heads, in offset order, and the result
// page counts them.
func TestBulkRetryPageFollowsChains(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, fixtureOptions{resend: true})
	var heads, parked []uuid.UUID
	for _, k := range []string{"a", "b"} {
		heads = append(heads, testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "orders", Partition: 0, Offset: 100, Key: []byte(k),
			Causing: "head-" + k, ErrorCode: "PROCESSING_FAILED", Value: []byte(k + "-head")}))
		parked = append(parked, testkit.InsertFailure(t, f.pool, testkit.FailureRow{Topic: "orders", Partition: 0, Offset: 101, Key: []byte(k),
			Causing: "p-" + k, ErrorCode: avro.CodeParkedBehind, Value: []byte(k + "-p1"), ParkedHead: "head-" + k}))
	}
	op := f.client()
	op.login(operatorToken)
	tok := op.csrf("/failures")
	resp, _ := op.do("POST", "/failures/retry", url.Values{"csrf": {tok}, "id": {heads[0].String(), heads[1].String()}, "reason": {"fixed"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bulk retry: %d", resp.StatusCode)
	}
	if _, body := op.do("GET", resp.Header.Get("Location"), nil); !strings.Contains(body, `<strong id="parked-count">2</strong> parked behind them`) {
		t.Errorf("result page: %s", body)
	}
	for _, id := range append(heads, parked...) {
		if st := f.state(id); st != redrive.StateResent {
			t.Errorf("%s: %s, want RESENT", id, st)
		}
	}
	got := map[string][]string{}
	for _, m := range f.kafka.ConsumeN(t, "orders", 4, 30*time.Second) {
		got[string(m.Key)] = append(got[string(m.Key)], string(m.Value))
	}
	for _, k := range []string{"a", "b"} {
		if want := []string{k + "-head", k + "-p1"}; !slices.Equal(got[k], want) {
			t.Errorf("records of %s: %v, want %v", k, got[k], want)
		}
	}
}
