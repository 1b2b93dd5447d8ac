package intake

import (
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/rest"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/internal/testkit"
)

// outageRegistry is a schema registry that has lost its schemas while down: it answers every
// look-up with 404 (not a transient failure: the intake dead-letters the events).
type outageRegistry struct {
	avro.Registry
	mu   sync.Mutex
	down bool
	// unreachable makes every look-up fail as a connection refused (a transient failure).
	unreachable bool
	// calls serialises the calls to the mock client, which is not safe for concurrent use
	// (the intake's writers register the dead-letter schema at once).
	calls sync.Mutex
}

func (o *outageRegistry) Register(ctx context.Context, subject, schema string) (int, error) {
	o.calls.Lock()
	defer o.calls.Unlock()
	return o.Registry.Register(ctx, subject, schema)
}

func (o *outageRegistry) SchemaByID(ctx context.Context, subject string, id int) (avro.RegistrySchema, error) {
	o.mu.Lock()
	down, unreachable := o.down, o.unreachable
	o.mu.Unlock()
	if unreachable {
		return avro.RegistrySchema{}, &url.Error{Op: "Get", URL: "http://registry:8081/schemas/ids/1",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	}
	if down {
		return avro.RegistrySchema{}, &rest.Error{Code: 40403, Message: "Schema not found"}
	}
	o.calls.Lock()
	defer o.calls.Unlock()
	return o.Registry.SchemaByID(ctx, subject, id)
}

func (o *outageRegistry) setDown(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

// waitRun polls a run until it ends.
func waitRun(t *testing.T, r *Reactivator, id int64) *redrive.Reactivation {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		run, err := r.Progress(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if run.State != redrive.ReactivationRunning {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d still running: %+v", id, run)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// After a registry outage made events undecodable, a reactivation of the own dead-letter topic
// stores them; what still fails stays; a later run resumes where the last stopped.
func TestReactivateAfterRegistryOutage(t *testing.T) {
	t.Parallel()
	mock, err := confluentsr.Dial("mock://"+t.Name(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	registry := &outageRegistry{Registry: mock, down: true}
	codec, err := avro.NewCodec(avro.Config{Registry: registry})
	if err != nil {
		t.Fatal(err)
	}
	e := newSourcesEnv(t, func(c *Config) { c.Codec = codec })
	producerCodec, err := avro.NewCodec(avro.Config{Registry: mock}) // registers the schema
	if err != nil {
		t.Fatal(err)
	}
	var framed [][]byte
	for range 3 {
		b, err := producerCodec.EncodeEvent(errorTopic, event(avro.Permanent))
		if err != nil {
			t.Fatal(err)
		}
		framed = append(framed, b)
	}
	e.produce(append(framed, []byte("not an event at all"))...)
	// A Connect record without context headers: dead-lettered until the source names its
	// original topic. A tombstone.
	e.kafka.Produce(t, testkit.Message(connectDLQ, []byte("c"), nil, kafka.Header{Key: "h", Value: []byte("1")}))
	e.start()
	e.waitFor("offsets committed", func() bool { return e.committedTopics(e.group, allSourceTopics()...) })
	e.kafka.ConsumeN(t, dltTopic, 5, waitLimit)
	if n := e.rows(); n != 0 {
		t.Fatalf("%d rows while the registry is down", n)
	}

	registry.setDown(false)
	sources := append([]Source{}, testSources...)
	sources[1].OriginalTopic = "payments" // the Connect source now knows where its records go
	r, err := NewReactivator(ReactivatorConfig{
		Store: e.store, NextAttempt: next, Codec: codec, Bootstrap: e.kafka.Bootstrap(), DeadLetterTopic: dltTopic,
		Topic: errorTopic, Sources: sources, BatchSize: 2,
		ConsumerConfig: kafka.ConfigMap{"log_level": 4},
		Logger:         e.intake.cfg.Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx := context.Background()
	fromIntake, err := e.intake.NewReactivator()
	if err != nil || fromIntake.cfg.DeadLetterTopic != dltTopic || len(fromIntake.sources) != len(testSources)+1 {
		t.Errorf("Intake.NewReactivator = %+v, %v", fromIntake, err)
	}
	if _, err := r.Start(ctx, ReactivateRequest{Principal: "alice"}); err == nil {
		t.Error("Start without a limit or up to now succeeded")
	}
	run, err := r.Start(ctx, ReactivateRequest{Principal: "alice", Reason: "registry restored", UpToNow: true})
	if err != nil {
		t.Fatal(err)
	}
	done := waitRun(t, r, run.ID)
	if done.State != redrive.ReactivationDone || done.Read != 5 || done.Reingested != 4 || done.StillFailing != 1 || done.Duplicates != 0 {
		t.Errorf("run = %+v, want DONE, 5 read, 4 re-ingested, 1 still failing", done)
	}
	if n := e.rows(); n != 4 {
		t.Errorf("%d rows, want the 3 events and the Connect record", n)
	}
	var null bool
	if err := e.pool.QueryRow(ctx, `SELECT original_value IS NULL FROM failures WHERE source_format = 'connect'`).Scan(&null); err != nil || !null {
		t.Errorf("reactivated tombstone: null %v, %v", null, err)
	}
	audit, err := e.store.ReactivationAudit(ctx, run.ID)
	if err != nil || len(audit) != 2 || audit[0].Action != redrive.AuditActionReactivateStart || audit[0].Principal != "alice" ||
		*audit[0].Reason != "registry restored" || audit[1].Action != redrive.AuditActionReactivateEnd || audit[1].Details["still_failing"] != float64(1) {
		t.Errorf("audit = %+v, %v", audit, err)
	}

	// The next run resumes after the last: nothing new.
	run, err = r.Start(ctx, ReactivateRequest{Principal: "bob", UpToNow: true})
	if err != nil {
		t.Fatal(err)
	}
	if done := waitRun(t, r, run.ID); done.State != redrive.ReactivationDone || done.Read != 0 {
		t.Errorf("second run = %+v, want DONE with nothing read", done)
	}

	// Two more bad records; a run of up to 1 record reads one, the next run the other.
	e.produce([]byte("bad 1"), []byte("bad 2"))
	e.waitFor("two more on the dead-letter topic", func() bool {
		n := int64(0)
		for _, o := range e.kafka.EndOffsets(dltTopic) {
			n += o
		}
		return n == 7
	})
	for i := range 2 {
		run, err = r.Start(ctx, ReactivateRequest{Principal: "carol", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if done := waitRun(t, r, run.ID); done.State != redrive.ReactivationDone || done.Read != 1 || done.StillFailing != 1 || *done.Limit != 1 {
			t.Errorf("limited run %d = %+v", i, done)
		}
	}
	positions, err := e.store.ReactivationPositions(ctx, dltTopic)
	if err != nil || positions[0] != 7 {
		t.Errorf("positions = %v, %v; want partition 0 at 7", positions, err)
	}
	if n := e.rows(); n != 4 {
		t.Errorf("%d rows after the runs, want 4", n)
	}
}

// A registry that cannot be reached stops a run before the record it could not decode; the
// next run, with the registry back, reads it.
func TestReactivateRegistryUnreachable(t *testing.T) {
	t.Parallel()
	mock, err := confluentsr.Dial("mock://"+t.Name(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	registry := &outageRegistry{Registry: mock, down: true}
	codec, err := avro.NewCodec(avro.Config{Registry: registry})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Codec = codec })
	producerCodec, err := avro.NewCodec(avro.Config{Registry: mock})
	if err != nil {
		t.Fatal(err)
	}
	b, err := producerCodec.EncodeEvent(errorTopic, event(avro.Permanent))
	if err != nil {
		t.Fatal(err)
	}
	e.produce(b)
	e.start()
	e.waitFor("offsets committed", e.committedAll)
	e.kafka.ConsumeN(t, dltTopic, 1, waitLimit)

	registry.mu.Lock()
	registry.down, registry.unreachable = false, true
	registry.mu.Unlock()
	r, err := e.intake.NewReactivator()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx := context.Background()
	run, err := r.Start(ctx, ReactivateRequest{Principal: "alice", UpToNow: true})
	if err != nil {
		t.Fatal(err)
	}
	if done := waitRun(t, r, run.ID); done.State != redrive.ReactivationFailed || done.Read != 0 || done.Error == nil ||
		!strings.Contains(*done.Error, "schema id") {
		t.Errorf("run with the registry unreachable = %+v", done)
	}
	registry.mu.Lock()
	registry.unreachable = false
	registry.mu.Unlock()
	run, err = r.Start(ctx, ReactivateRequest{Principal: "alice", UpToNow: true})
	if err != nil {
		t.Fatal(err)
	}
	if done := waitRun(t, r, run.ID); done.State != redrive.ReactivationDone || done.Read != 1 || done.Reingested != 1 {
		t.Errorf("run with the registry back = %+v", done)
	}
	if n := e.rows(); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}
