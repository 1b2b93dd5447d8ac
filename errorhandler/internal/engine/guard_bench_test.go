package engine

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	eh "github.com/redrive/redrive/errorhandler"
)

// nopStore is an OrderingStore that holds nothing.
type nopStore struct{}

func (nopStore) Load(context.Context, string, int32) (map[string][]byte, error)  { return nil, nil }
func (nopStore) Save(context.Context, string, int32, ...eh.OrderingRecord) error { return nil }

// BenchmarkGuardHappyPath measures the worker's cost per record handled without error (the
// handler does nothing), without the ordering guard, with it and nothing parked, and with it
// and 100 other keys parked, side by side: the guard's own cost on the happy path, without
// Kafka.
//
//	go test -run '^$' -bench GuardHappyPath -count 5 ./errorhandler/internal/engine/
func BenchmarkGuardHappyPath(b *testing.B) {
	for _, v := range []struct {
		name       string
		on, parked bool
	}{{"off", false, false}, {"on", true, false}, {"on-100-parked", true, true}} {
		on := v.on
		b.Run(v.name, func(b *testing.B) {
			cfg := eh.Config[[]byte, []byte]{
				GroupID: "g", Topics: []string{"t"}, System: "s", Service: "s",
				ValueDecoder: eh.Bytes(), ProcessPolicy: eh.DeadLetter,
				DeadLetter: eh.DeadLetterConfig{ErrorTopic: "e"},
				Handler:    eh.HandlerFunc[[]byte, []byte](func(context.Context, eh.Record[[]byte, []byte]) error { return nil }),
				Metrics:    prometheus.NewRegistry(),
			}
			if on {
				cfg.Ordering = eh.Ordering{Topics: []string{"t"}, Store: nopStore{}}
			}
			e, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			p := newPartition(TP{Topic: "t"}, e.met, e.sig)
			e.attachGuard(p)
			if on {
				<-p.guard.ready
			}
			if v.parked {
				for i := range 100 {
					p.guard.keys["parked-"+strconv.Itoa(i)] = &guardEntry{Head: "t/0/" + strconv.Itoa(i)}
				}
			}
			msgs := make([]eh.Message, 1000)
			for i := range msgs {
				msgs[i] = eh.Message{Topic: "t", Key: []byte("order-" + strconv.Itoa(i)), Value: []byte(`{"id":1}`)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				m := &msgs[i%len(msgs)]
				m.Offset = int64(i)
				if !e.handle(p, m) {
					b.Fatal("not handled")
				}
			}
		})
	}
}
