package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	eh "github.com/redrive/redrive/errorhandler"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/redrive/redrive/avro"
)

// TestPolicies runs each policy in each phase: ten records on one partition, the sixth fails.
func TestPolicies(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		for _, phase := range []eh.Phase{eh.PhaseDecode, eh.PhaseProcess} {
			for _, policy := range []eh.Policy{eh.Fail, eh.Skip, eh.DeadLetter} {
				t.Run(fmt.Sprintf("%s/%s", phase, policy), func(t *testing.T) {
					t.Parallel()
					e := newEnv(t, a, 1)
					vals := values("ok", 10)
					if phase == eh.PhaseDecode {
						vals[5] = "bad5"
					} else {
						vals[5] = "fail5"
					}
					sent := e.produce(0, vals...)
					h := newRecorder()
					cfg := e.config("policy", h)
					cfg.DecodePolicy, cfg.ProcessPolicy = eh.Fail, eh.Fail
					if phase == eh.PhaseDecode {
						cfg.DecodePolicy = policy
					} else {
						cfg.ProcessPolicy = policy
					}
					s := e.start(cfg)
					switch policy {
					case eh.Fail:
						waitFor(t, "partition halted", func() bool { return len(s.r.Health().Halted) == 1 })
						hp := s.r.Health().Halted[0]
						if hp.Offset != 5 || hp.Phase != phase || hp.Reason != eh.ReasonFailure || s.r.Health().Status != "degraded" {
							t.Fatalf("health %+v, want halted at 5 in phase %s", s.r.Health(), phase)
						}
						waitFor(t, "commit up to the halted record", func() bool { return e.committed("policy", 0) == 5 })
						if got := e.failures(string(phase), "halted"); got != 1 {
							t.Errorf("halted counter = %v, want 1", got)
						}
						if err := s.stop(); err != nil {
							t.Fatalf("Run: %v", err)
						}
						if c := e.committed("policy", 0); c != 5 {
							t.Errorf("committed %d after shutdown, want 5", c)
						}
						wantSeen := 5
						if phase == eh.PhaseProcess {
							wantSeen = 6
						}
						if h.count() != wantSeen {
							t.Errorf("handler saw %d records, want %d", h.count(), wantSeen)
						}
					case eh.Skip:
						waitFor(t, "committed to the end", func() bool { return e.committed("policy", 0) == 10 })
						if got := e.failures(string(phase), "skipped"); got != 1 {
							t.Errorf("skipped counter = %v, want 1", got)
						}
						if n := e.errTopicCount(); n != 0 {
							t.Errorf("error topic has %d records, want 0", n)
						}
					case eh.DeadLetter:
						waitFor(t, "committed to the end", func() bool { return e.committed("policy", 0) == 10 })
						evs := e.mpfes(1)
						checkMPFE(t, evs[0], sent[5], phase)
						if got := e.failures(string(phase), "dead_lettered"); got != 1 {
							t.Errorf("dead_lettered counter = %v, want 1", got)
						}
					}
					if policy != eh.Fail && h.count() < 9 {
						t.Errorf("handler saw %d records, want every good one", h.count())
					}
				})
			}
		}
	})
}

// checkMPFE checks the event of a failed record against the contract.
func checkMPFE(t *testing.T, ev *avro.Event, orig *kafka.Message, phase eh.Phase) {
	t.Helper()
	ref := ev.References.Message
	if ref.TopicName != *orig.TopicPartition.Topic || ref.Partition != orig.TopicPartition.Partition || ref.Offset != int64(orig.TopicPartition.Offset) {
		t.Errorf("reference %+v, want %s[%d]@%d", ref, *orig.TopicPartition.Topic, orig.TopicPartition.Partition, orig.TopicPartition.Offset)
	}
	if !bytes.Equal(ev.Payload.OriginalMessage, orig.Value) || !bytes.Equal(ev.Payload.OriginalKey, orig.Key) || (orig.Key == nil) != (ev.Payload.OriginalKey == nil) {
		t.Errorf("original key/value %q/%q, want %q/%q", ev.Payload.OriginalKey, ev.Payload.OriginalMessage, orig.Key, orig.Value)
	}
	hs, err := ev.Payload.FailedMessageMetadata.OriginalHeaders()
	if err != nil {
		t.Fatalf("OriginalHeaders: %v", err)
	}
	if len(hs) != len(orig.Headers) {
		t.Fatalf("headers %v, want %v", hs, orig.Headers)
	}
	for i, h := range hs {
		o := orig.Headers[i]
		if h.Name != o.Key || !bytes.Equal(h.Value, o.Value) || (h.Value == nil) != (o.Value == nil) {
			t.Errorf("header %d = %s=%q, want %s=%q", i, h.Name, h.Value, o.Key, o.Value)
		}
	}
	if ev.Publisher.System != "test-system" || ev.Publisher.Service != "test-service" {
		t.Errorf("publisher %+v", ev.Publisher)
	}
	if ev.Identity.EventID == "" || ev.Identity.IdempotenceID == "" || ev.Identity.EventID == ev.Identity.IdempotenceID {
		t.Errorf("identity %+v: want two fresh ids", ev.Identity)
	}
	if ev.Type.Name != avro.EventTypeName || ev.Type.Version != avro.EventTypeVersion || ev.DomainEventVersion != avro.DomainEventVersion {
		t.Errorf("type %+v / domainEventVersion %q", ev.Type, ev.DomainEventVersion)
	}
	et := ev.References.ErrorType
	switch phase {
	case eh.PhaseDecode:
		if et.Code != avro.CodeDeserializationFailed || et.Temporality != avro.Permanent {
			t.Errorf("decode failure classified %+v", et)
		}
	case eh.PhaseProcess:
		if et.Code != avro.CodeUnknownException || et.Temporality != avro.Unknown {
			t.Errorf("process failure classified %+v", et)
		}
	}
	if ev.Payload.StackTrace == nil || ev.Payload.StackTraceHash == nil || *ev.Payload.StackTraceHash == "" {
		t.Errorf("no stack trace or hash")
	}
}

func TestDecodeHook(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		topic := testTopic
		msg := func(key, val string) *kafka.Message {
			m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Key: []byte(key)}
			if val != "<tombstone>" {
				m.Value = []byte(val)
			}
			return m
		}
		e.k.Produce(t,
			msg("k0", "ok0"),
			msg("k1", "bad-skip"),
			msg("k2", "bad-substitute"),
			msg("badkey-substitute", "ok3"),
			msg("k4", "bad-wrongtype"),
			msg("k5", "bad-raise"),
			msg("k6", "<tombstone>"),
			msg("k7", "ok7"),
		)
		var seen []eh.Record[string, string]
		var hookCalls []*eh.DecodeError
		h := eh.HandlerFunc[string, string](func(_ context.Context, rec eh.Record[string, string]) error {
			seen = append(seen, rec)
			return nil
		})
		base := e.config("hook", nil)
		cfg := eh.Config[string, string]{
			GroupID: "hook", Topics: base.Topics, System: base.System, Service: base.Service,
			DeadLetter: base.DeadLetter, CommitInterval: base.CommitInterval,
			Logger: base.Logger, Metrics: e.reg, Concurrency: 1,
			KeyDecoder: eh.DecoderFunc[string](func(_ string, b []byte) (string, error) {
				if strings.HasPrefix(string(b), "badkey") {
					return "", errors.New("undecodable key")
				}
				return string(b), nil
			}),
			ValueDecoder:  stringDecoder(),
			Handler:       h,
			DecodePolicy:  eh.DeadLetter,
			ProcessPolicy: eh.Fail,
			OnDecodeError: func(de *eh.DecodeError) eh.Decision {
				hookCalls = append(hookCalls, de)
				switch {
				case strings.HasSuffix(string(de.Data), "-skip"):
					return eh.SkipRecord()
				case strings.HasSuffix(string(de.Data), "-substitute"):
					return eh.Substitute("substituted")
				case strings.HasSuffix(string(de.Data), "-wrongtype"):
					return eh.Substitute(42)
				}
				return eh.Raise()
			},
		}
		r, err := newRunner(e, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		stopped := false
		defer func() {
			if !stopped {
				cancel()
				<-done
			}
		}()
		waitFor(t, "committed to the end", func() bool { return e.committed("hook", 0) == 8 })
		cancel()
		stopped = true
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}

		if len(hookCalls) != 5 {
			t.Fatalf("hook called %d times, want 5", len(hookCalls))
		}
		if de := hookCalls[0]; de.Part != eh.PartValue || de.Topic != testTopic || de.Partition != 0 || de.Offset != 1 || string(de.Data) != "bad-skip" || de.Err == nil {
			t.Errorf("hook got %+v", de)
		}
		if hookCalls[2].Part != eh.PartKey {
			t.Errorf("third hook call is for part %s, want key", hookCalls[2].Part)
		}
		// Handled: ok0, substituted value of offset 2, tombstone, ok7.
		var got []string
		for _, rec := range seen {
			got = append(got, fmt.Sprintf("%d:%s:%v:%v", rec.Message.Offset, rec.Value, rec.Substituted, rec.Tombstone))
		}
		want := []string{"0:ok0:false:false", "2:substituted:true:false", "6::false:true", "7:ok7:false:false"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("handled %v, want %v", got, want)
		}
		// Dead-lettered: the refused key substitution (3), the wrong type (4), the raise (5).
		evs := e.mpfes(3)
		for i, off := range []int64{3, 4, 5} {
			if evs[i].References.Message.Offset != off || evs[i].References.ErrorType.Code != avro.CodeDeserializationFailed {
				t.Errorf("MPFE %d: %+v", i, evs[i].References)
			}
		}
		if !strings.Contains(evs[0].Payload.ErrorMessage, "refused") {
			t.Errorf("key substitution MPFE error %q does not say it was refused", evs[0].Payload.ErrorMessage)
		}
		if !strings.Contains(evs[1].Payload.ErrorMessage, "wrong type") {
			t.Errorf("wrong-type MPFE error %q", evs[1].Payload.ErrorMessage)
		}
		for outcome, want := range map[string]float64{"skipped": 1, "substituted": 1, "dead_lettered": 3} {
			if got := e.failures("decode", outcome); got != want {
				t.Errorf("decode/%s counter = %v, want %v", outcome, got, want)
			}
		}
	})
}

func TestTargetServiceFilter(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 1)
		topic := testTopic
		mk := func(v string, hs ...kafka.Header) *kafka.Message {
			return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte(v), Headers: hs}
		}
		e.k.Produce(t,
			mk("mine", kafka.Header{Key: avro.HeaderTargetService, Value: []byte("test-service")}),
			mk("theirs", kafka.Header{Key: avro.HeaderTargetService, Value: []byte("other-service")}),
			mk("plain"),
			mk("theirs-failing", kafka.Header{Key: avro.HeaderTargetService, Value: []byte("other-service")}),
		)
		h := newRecorder()
		cfg := e.config("filter", h)
		s := e.start(cfg)
		waitFor(t, "committed to the end", func() bool { return e.committed("filter", 0) == 4 })
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(h.vals, ","); got != "mine,plain" {
			t.Errorf("handled %s, want mine,plain", got)
		}
		if got := e.failures("filter", "filtered"); got != 2 {
			t.Errorf("filtered counter = %v, want 2", got)
		}
	})
}

func TestContainmentAndOperatorRelease(t *testing.T) {
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 3)
		vals := values("ok", 20)
		vals[7] = "fail7"
		vals[12] = "fail12"
		var sent1 []*kafka.Message
		for p := int32(0); p < 3; p++ {
			if p == 1 {
				sent1 = e.produce(p, vals...)
			} else {
				e.produce(p, values("ok", 20)...)
			}
		}
		h := newRecorder()
		s := e.start(e.config("contain", h))
		srv := httptest.NewServer(s.r.HealthHandler())
		defer srv.Close()

		// The other partitions run to the end while partition 1 is halted at 7.
		waitFor(t, "partition 1 halted", func() bool { return len(s.r.Health().Halted) == 1 })
		waitFor(t, "partitions 0 and 2 committed", func() bool {
			return e.committed("contain", 0) == 20 && e.committed("contain", 2) == 20
		})
		waitFor(t, "partition 1 committed to the halted record", func() bool { return e.committed("contain", 1) == 7 })

		var health eh.Health
		getJSON(t, srv.URL, &health)
		if health.Status != "degraded" || len(health.Halted) != 1 {
			t.Fatalf("GET health = %+v", health)
		}
		hp := health.Halted[0]
		if hp.Topic != testTopic || hp.Partition != 1 || hp.Offset != 7 || hp.Phase != eh.PhaseProcess || hp.Error != "cannot process fail7" || hp.Since.IsZero() {
			t.Errorf("halted partition %+v", hp)
		}

		// Bad requests.
		for body, status := range map[string]int{
			`{"topic":"orders","partition":1,"action":"retry"}`:           http.StatusBadRequest,
			`{"topic":"orders","action":"skip"}`:                          http.StatusBadRequest,
			`{"topic":"orders","partition":0,"action":"skip"}`:            http.StatusNotFound,
			`{"topic":"orders","partition":9,"action":"skip"}`:            http.StatusNotFound,
			`{"topic":"orders","partition":1,"offset":6,"action":"skip"}`: http.StatusConflict,
			`not json`: http.StatusBadRequest,
		} {
			if got := post(t, srv.URL, body); got != status {
				t.Errorf("POST %s = %d, want %d", body, got, status)
			}
		}

		// Release with skip: the partition resumes and halts again at 12.
		if got := post(t, srv.URL, `{"topic":"orders","partition":1,"offset":7,"action":"skip"}`); got != http.StatusOK {
			t.Fatalf("release skip = %d", got)
		}
		waitFor(t, "halted again at 12", func() bool {
			hs := s.r.Health().Halted
			return len(hs) == 1 && hs[0].Offset == 12
		})
		waitFor(t, "committed to 12", func() bool { return e.committed("contain", 1) == 12 })

		// Release with dead-letter: the MPFE is published and the partition runs to the end.
		if got := post(t, srv.URL, `{"topic":"orders","partition":1,"action":"dead-letter"}`); got != http.StatusOK {
			t.Fatalf("release dead-letter = %d", got)
		}
		waitFor(t, "committed to the end", func() bool { return e.committed("contain", 1) == 20 })
		if hs := s.r.Health(); hs.Status != "ok" || len(hs.Halted) != 0 {
			t.Errorf("health after release %+v", hs)
		}
		evs := e.mpfes(1)
		checkMPFE(t, evs[0], sent1[12], eh.PhaseProcess)
		// Every record of partition 1 after the first halt was handled once, in order.
		got := h.offsets(1)
		want := []int64{}
		for i := int64(0); i < 20; i++ {
			want = append(want, i)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("partition 1 handled %v, want %v", got, want)
		}
		if e.failures("process", "skipped") != 1 || e.failures("process", "halted") != 2 || e.failures("process", "dead_lettered") != 1 {
			t.Errorf("counters skipped=%v halted=%v dead_lettered=%v", e.failures("process", "skipped"), e.failures("process", "halted"), e.failures("process", "dead_lettered"))
		}
	})
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
