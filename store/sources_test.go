package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func TestIngestSourceAndTombstone(t *testing.T) {
	t.Parallel()
	s, _ := newIntakeStore(t)
	ctx := context.Background()
	spring := incoming(t, intakeEvent("spring-1", avro.Permanent))
	spring.ValueNull = true
	spring.Event.Payload.OriginalMessage = nil
	spring.Source = store.Source{Format: store.SourceSpring, Topic: "orders.DLT", Partition: 2, Offset: 77}
	spring.Headers = []avro.Header{{Name: "a", Value: []byte("1")}, {Name: "kafka_dlt-original-topic", Value: []byte("orders")}}
	empty := incoming(t, intakeEvent("mpfe-empty", avro.Temporary))
	empty.Event.Payload.OriginalMessage = []byte{}
	res := ingest(t, s, spring, empty)

	d, err := s.FailureByID(ctx, res.Outcomes[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !d.ValueNull || d.Value != nil {
		t.Errorf("tombstone: ValueNull %v, Value %q", d.ValueNull, d.Value)
	}
	if d.SourceFormat != store.SourceSpring || d.SourceTopic == nil || *d.SourceTopic != "orders.DLT" ||
		*d.SourcePartition != 2 || *d.SourceOffset != 77 {
		t.Errorf("source = %v %v %v %v", d.SourceFormat, d.SourceTopic, d.SourcePartition, d.SourceOffset)
	}
	d2, err := s.FailureByID(ctx, res.Outcomes[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d2.ValueNull || d2.Value == nil || len(d2.Value) != 0 || d2.SourceFormat != store.SourceMPFE || d2.SourceTopic != nil {
		t.Errorf("empty value: ValueNull %v, Value %v, format %q, topic %v", d2.ValueNull, d2.Value, d2.SourceFormat, d2.SourceTopic)
	}

	page, _, err := s.ListFailures(ctx, store.ListParams{Filter: store.Filter{SourceFormats: []store.SourceFormat{store.SourceSpring}}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].ID != res.Outcomes[0].ID || !page[0].ValueNull || page[0].ValueSize != 0 ||
		page[0].SourceFormat != store.SourceSpring || *page[0].SourceTopic != "orders.DLT" {
		t.Errorf("filter by source format: %+v", page)
	}
	page, _, err = s.ListFailures(ctx, store.ListParams{Filter: store.Filter{SourceTopic: "orders.DLT"}, Limit: 10})
	if err != nil || len(page) != 1 {
		t.Errorf("filter by source topic: %d rows, %v", len(page), err)
	}
	f := store.Filter{SourceFormats: []store.SourceFormat{"kafka"}}
	if err := f.Validate(); !errors.Is(err, store.ErrBadFilter) {
		t.Errorf("unknown source format: %v", err)
	}

	items, err := s.ResendItems(ctx, []uuid.UUID{res.Outcomes[0].ID, res.Outcomes[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		switch it.ID {
		case res.Outcomes[0].ID:
			if it.Value != nil || it.SourceFormat != store.SourceSpring {
				t.Errorf("tombstone resend item: value %v, format %q", it.Value, it.SourceFormat)
			}
		case res.Outcomes[1].ID:
			if it.Value == nil || len(it.Value) != 0 {
				t.Errorf("empty value resend item: %v", it.Value)
			}
		}
	}
}

func TestPrepareValidatesSource(t *testing.T) {
	t.Parallel()
	in := incoming(t, intakeEvent("x", avro.Permanent))
	in.Source = store.Source{Format: "kafka"}
	if _, err := store.Prepare(in); !errors.Is(err, store.ErrBadData) {
		t.Errorf("bad format: %v", err)
	}
	in.Source = store.Source{Format: store.SourceRaw, Topic: "bad\xff"}
	if _, err := store.Prepare(in); !errors.Is(err, store.ErrBadData) {
		t.Errorf("bad topic: %v", err)
	}
	in.Source = store.Source{Format: store.SourceRaw, Topic: "x.DLQ"}
	p, err := store.Prepare(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.CausingMessage() != "orders/1/42" {
		t.Errorf("causing message %q", p.CausingMessage())
	}
}

// TestIngestConcurrentGroupsNoDeadlock runs instances that ingest failures of overlapping groups
// at the same moment, round after round, each batch's groups in another order: the groups'
// last_seen updates lock in one order, so no transaction deadlocks (SQLSTATE 40P01).
func TestIngestConcurrentGroupsNoDeadlock(t *testing.T) {
	t.Parallel()
	_, pool := newIntakeStore(t)
	const (
		instances = 6
		rounds    = 25
		groups    = 24
		perBatch  = 40
	)
	var clock sync.Mutex
	now := intakeNow
	tick := func() time.Time { // every call a later time, so that every touch updates
		clock.Lock()
		defer clock.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		s, err := store.New(store.Config{Pool: pool, Now: tick})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for r := range rounds {
				batch := make([]store.Incoming, perBatch)
				for j := range batch {
					e := intakeEvent(fmt.Sprintf("i%d-r%d-%d", i, r, j), avro.Permanent)
					e.Payload.StackTraceHash = avro.Ptr(fmt.Sprintf("h%02d", rng.IntN(groups)))
					e.References.Message.Offset = int64(i*100000 + r*1000 + j)
					batch[j] = incoming(t, e)
				}
				if _, err := s.Ingest(context.Background(), batch, intakeNext); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			t.Errorf("instance %d deadlocked: %v", i, err)
		} else if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	if n := countRows(t, pool, "SELECT count(*) FROM failures"); n != instances*rounds*perBatch {
		t.Errorf("%d rows, want %d", n, instances*rounds*perBatch)
	}
}

// The source filters read their indexes (migrations 007 and 020), not the whole table.
func TestSourceFiltersUseIndexes(t *testing.T) {
	t.Parallel()
	s, pool := newIntakeStore(t)
	ctx := context.Background()
	var batch []store.Incoming
	for i := range 3000 {
		in := incoming(t, intakeEvent(fmt.Sprintf("idx-%d", i), avro.Permanent))
		in.Source = store.Source{Format: store.SourceMPFE, Topic: "errors", Partition: 0, Offset: int64(i)}
		if i%300 == 0 {
			in.Source = store.Source{Format: store.SourceSpring, Topic: "orders.DLT", Partition: 0, Offset: int64(i)}
		}
		batch = append(batch, in)
	}
	ingest(t, s, batch...)
	if _, err := pool.Exec(ctx, `ANALYZE failure_records, failure_states`); err != nil {
		t.Fatal(err)
	}
	// The partitions' indexes are named after the partition and the columns.
	for name, f := range map[string]store.Filter{
		"_source_format_created_at_id_idx": {SourceFormats: []store.SourceFormat{store.SourceSpring}},
		"_source_topic_created_at_id_idx":  {SourceTopic: "orders.DLT"},
	} {
		plan, err := s.ExplainList(ctx, store.ListParams{Filter: f, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, name) {
			t.Errorf("%+v: plan does not use %s:\n%s", f, name, plan)
		}
	}
}
