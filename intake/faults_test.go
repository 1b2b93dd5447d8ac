package intake

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

func TestIntakeBadRecordsToDeadLetterTopic(t *testing.T) {
	t.Parallel()
	small, err := avro.NewCodec(avro.Config{MaxSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Codec = small })

	valid := e.encode(event(avro.Permanent))
	wrongFingerprint := bytes.Clone(valid)
	wrongFingerprint[5] ^= 0xff
	badTemporality := bytes.Replace(e.encode(event(avro.Temporary)), []byte("TEMPORARY"), []byte("TEMPORAXY"), 1)
	badOffset := bytes.Replace(e.encode(event(avro.Temporary)), []byte("4242424242"), []byte("42424x4242"), 1)
	nul := event(avro.Permanent)
	nul.Payload.ErrorMessage = "a\x00b"
	big := bytes.Repeat([]byte{0xab}, 10_000)

	bad := map[string][]byte{ // the check each record fails
		string(avro.CheckFirstByte):   []byte("plain text, not Avro"),
		string(avro.CheckFingerprint): wrongFingerprint,
		string(avro.CheckTruncated):   valid[:len(valid)/2],
		string(avro.CheckTemporality): badTemporality,
		string(avro.CheckNumber):      badOffset,
		checkData:                     e.encode(nul),
		string(avro.CheckSizeLimit):   big,
		string(avro.CheckEmpty):       nil,
	}
	if bytes.Equal(badTemporality, valid) || !bytes.Contains(badOffset, []byte("42424x4242")) {
		t.Fatal("could not spoil the events")
	}
	headers := []kafka.Header{{Key: "h", Value: []byte("1")}, {Key: "n", Value: nil}, {Key: "h", Value: []byte("2")}}
	var msgs []*kafka.Message
	checks := []string{}
	for check, v := range bad {
		checks = append(checks, check)
		msgs = append(msgs, testkit.Message(errorTopic, []byte("key-"+check), v, headers...))
	}
	msgs = append(msgs, testkit.Message(errorTopic, nil, valid))
	delivered := e.kafka.Produce(t, msgs...)
	e.start()
	e.waitFor("offsets committed", e.committedAll)

	if n := e.rows(); n != 1 {
		t.Errorf("%d rows, want the one valid event", n)
	}
	out := e.kafka.ConsumeN(t, dltTopic, len(bad), waitLimit)
	byPos := make(map[string]*avro.Event)
	for _, m := range out {
		ev, err := e.codec.DecodeEvent(dltTopic, m.Value)
		if err != nil {
			t.Fatalf("dead-letter record does not decode: %v", err)
		}
		k, err := e.codec.DecodeKey(dltTopic, m.Key)
		if err != nil || k.Key != ev.Identity.IdempotenceID {
			t.Errorf("dead-letter key %+v, %v; want the idempotenceId", k, err)
		}
		ref := ev.References.Message
		byPos[redrive.TopicPartitionOffset(ref.TopicName, ref.Partition, ref.Offset)] = ev
	}
	for i, check := range checks {
		m := delivered[i]
		pos := redrive.TopicPartitionOffset(errorTopic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))
		ev := byPos[pos]
		if ev == nil {
			t.Errorf("%s: no dead-letter event for %s", check, pos)
			continue
		}
		et := ev.References.ErrorType
		if et.Code != avro.CodeDeserializationFailed || et.Temporality != avro.Permanent {
			t.Errorf("%s: error type %+v", check, et)
		}
		desc := ""
		if ev.Payload.ErrorDescription != nil {
			desc = *ev.Payload.ErrorDescription
		}
		if !strings.Contains(desc, "check: "+check) {
			t.Errorf("%s: description %q does not name the check", check, desc)
		}
		if !bytes.Equal(ev.Payload.OriginalKey, m.Key) {
			t.Errorf("%s: originalKey %q, want %q", check, ev.Payload.OriginalKey, m.Key)
		}
		wantValue := m.Value
		switch check {
		case string(avro.CheckEmpty):
			wantValue = []byte(avro.EmptyContent)
		case string(avro.CheckSizeLimit): // cut to fit the codec's limit, and said so
			if !strings.Contains(desc, "cut from 10000") || !bytes.HasPrefix(big, ev.Payload.OriginalMessage) || len(ev.Payload.OriginalMessage) == 0 {
				t.Errorf("oversized record: %d bytes kept, description %q", len(ev.Payload.OriginalMessage), desc)
			}
			continue
		}
		if !bytes.Equal(ev.Payload.OriginalMessage, wantValue) {
			t.Errorf("%s: originalMessage %q, want the raw %q", check, ev.Payload.OriginalMessage, wantValue)
		}
		hs, err := ev.Payload.FailedMessageMetadata.OriginalHeaders()
		if err != nil {
			t.Fatal(err)
		}
		want := []avro.Header{{Name: "h", Value: []byte("1")}, {Name: "n", Value: nil}, {Name: "h", Value: []byte("2")}}
		if fmt.Sprint(hs) != fmt.Sprint(want) || hs[1].Value != nil {
			t.Errorf("%s: headers %v, want %v", check, hs, want)
		}
		if got := testutil.ToFloat64(e.intake.metrics.deadLettered.WithLabelValues(check)); got != 1 {
			t.Errorf("dead_lettered{check=%q} = %v, want 1", check, got)
		}
	}
}

func TestIntakeCommitsOnlyAfterDeadLetterAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.ProducerConfig["message.timeout.ms"] = 300 })
	fault := e.kafka.FailProduce(dltTopic, 0)
	topic := errorTopic
	e.kafka.Produce(t, // one partition, the bad record first: nothing after it may be committed
		&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte("not an event")},
		&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: e.encode(event(avro.Temporary))})
	e.start()
	e.waitFor("not ready", func() bool {
		err := e.intake.Ready()
		return err != nil && strings.Contains(err.Error(), "dead-letter")
	})
	e.waitFor("several failed deliveries", func() bool { return testutil.ToFloat64(e.intake.metrics.deadLetterErr) >= 2 })
	if n := e.committedSum(); n != 0 {
		t.Fatalf("offsets committed (%d) before the dead-letter event was acknowledged", n)
	}
	fault.Remove()
	e.waitFor("offsets committed", e.committedAll)
	e.kafka.ConsumeN(t, dltTopic, 1, waitLimit)
	if err := e.intake.Ready(); err != nil {
		t.Errorf("Ready after recovery = %v", err)
	}
	if n := e.rows(); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}

// adminExec runs statements on the server's maintenance database.
func adminExec(t *testing.T, sqls ...string) {
	t.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		url = testkit.DefaultDatabaseURL
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// cutDatabase refuses new connections to the test database and terminates the open ones, as a
// Postgres that goes away does; the returned func lets connections in again.
func (e *env) cutDatabase() func() {
	e.t.Helper()
	name := pgx.Identifier{e.db.Name}.Sanitize()
	adminExec(e.t, "ALTER DATABASE "+name+" WITH ALLOW_CONNECTIONS false",
		fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'", e.db.Name))
	restore := func() { adminExec(e.t, "ALTER DATABASE "+name+" WITH ALLOW_CONNECTIONS true") }
	e.t.Cleanup(restore)
	return restore
}

func TestIntakePostgresDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	batch := func() [][]byte {
		var vs [][]byte
		for i := 0; i < 5; i++ {
			vs = append(vs, e.encode(event(avro.Temporary)))
		}
		return vs
	}
	e.produce(batch()...)
	e.start()
	e.waitFor("first batch", func() bool { return e.committedAll() && e.rows() == 5 })
	before := e.committedSum()

	restore := e.cutDatabase()
	e.produce(batch()...)
	e.waitFor("not ready", func() bool {
		err := e.intake.Ready()
		return err != nil && strings.Contains(err.Error(), "postgres")
	})
	e.waitFor("several failed writes", func() bool { return testutil.ToFloat64(e.intake.metrics.storeErrors) >= 3 })
	if n := e.committedSum(); n != before {
		t.Fatalf("offsets moved from %d to %d while Postgres was down", before, n)
	}
	restore()
	e.waitFor("recovery", func() bool { return e.committedAll() && e.intake.Ready() == nil })
	if n := e.rows(); n != 10 {
		t.Errorf("%d rows after recovery, want 10", n)
	}
}

func TestIntakeLockedTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	e.produce(e.encode(event(avro.Permanent)))
	e.start()
	e.waitFor("first record", func() bool { return e.committedAll() && e.rows() == 1 })
	before := e.committedSum()

	ctx := context.Background()
	lock, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, "LOCK TABLE failures IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	e.produce(e.encode(event(avro.Permanent)), e.encode(event(avro.Temporary)))
	e.waitFor("not ready", func() bool {
		err := e.intake.Ready()
		return err != nil && strings.Contains(err.Error(), "postgres")
	})
	if n := e.committedSum(); n != before {
		t.Fatalf("offsets moved from %d to %d while the table was locked", before, n)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor("recovery", func() bool { return e.committedAll() && e.intake.Ready() == nil })
	if n := e.rows(); n != 3 {
		t.Errorf("%d rows, want 3", n)
	}
}

func TestIntakeShutdownWhilePostgresDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.ShutdownTimeout = 500 * time.Millisecond })
	e.cutDatabase()
	e.produce(e.encode(event(avro.Permanent)))
	e.start()
	e.waitFor("not ready", func() bool {
		err := e.intake.Ready()
		return err != nil && strings.Contains(err.Error(), "postgres")
	})
	start := time.Now()
	if err := e.stopIntake(); err != nil {
		t.Errorf("Run = %v", err)
	}
	t.Logf("stopped in %v", time.Since(start))
	if n := e.committedSum(); n != 0 {
		t.Errorf("committed %d without writing the batch", n)
	}
}

func TestStateMetrics(t *testing.T) {
	t.Parallel()
	pool := testkit.Postgres(t)
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	s, err := store.New(store.Config{Pool: pool, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewStateMetrics(StateMetricsConfig{}); err == nil {
		t.Error("NewStateMetrics without a store succeeded")
	}
	if _, err := NewStateMetrics(StateMetricsConfig{Store: s, Clusters: []string{"Bad"}}); err == nil || !strings.Contains(err.Error(), "Clusters") {
		t.Errorf("NewStateMetrics with a bad cluster name = %v", err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewStateMetrics(StateMetricsConfig{Store: s, Registerer: reg, Clusters: []string{"default", "east"},
		Now: func() time.Time { return now.Add(90 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	// Three failures of the default cluster, one PERMANENT of east, and one RETRY_PENDING of
	// a cluster no longer configured ("gone"), stored an hour earlier.
	var batch []store.Incoming
	for i, temp := range []avro.Temporality{avro.Temporary, avro.Permanent, avro.Unknown} {
		ev := event(temp)
		ev.References.Message.Offset = int64(i)
		batch = append(batch, store.Incoming{Event: ev})
	}
	east := event(avro.Permanent)
	east.References.Message.Offset = 10
	gone := event(avro.Temporary)
	gone.References.Message.Offset = 11
	batch = append(batch, store.Incoming{Event: east, Source: store.Source{Cluster: "east"}},
		store.Incoming{Event: gone, Source: store.Source{Cluster: "gone"}})
	if _, err := s.Ingest(context.Background(), batch, next); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE failures SET created_at = created_at - interval '1 hour' WHERE cluster = 'gone'`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	deadline := time.Now().Add(waitLimit)
	for testutil.ToFloat64(m.count.WithLabelValues("default", "PERMANENT")) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("gauges not refreshed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	var want strings.Builder
	want.WriteString("# HELP redrive_failures Stored failures by Kafka cluster and state, refreshed periodically; cluster=\"_other\" for clusters not configured.\n# TYPE redrive_failures gauge\n")
	counts := map[string][4]int{"_other": {1, 0, 0, 0}, "default": {1, 2, 0, 0}, "east": {0, 1, 0, 0}}
	for _, cluster := range []string{"_other", "default", "east"} {
		for i, state := range []string{"CLOSED", "PERMANENT", "RESENT", "RETRY_PENDING"} {
			n := counts[cluster][[4]int{3, 1, 2, 0}[i]]
			fmt.Fprintf(&want, "redrive_failures{cluster=%q,state=%q} %d\n", cluster, state, n)
		}
	}
	want.WriteString("# HELP redrive_failures_oldest_age_seconds Age of the oldest stored failure in an open state (RETRY_PENDING, PERMANENT) by Kafka cluster; 0 when none.\n# TYPE redrive_failures_oldest_age_seconds gauge\n")
	for _, l := range []string{`cluster="_other",state="PERMANENT"} 0`, `cluster="_other",state="RETRY_PENDING"} 3690`,
		`cluster="default",state="PERMANENT"} 90`, `cluster="default",state="RETRY_PENDING"} 90`,
		`cluster="east",state="PERMANENT"} 90`, `cluster="east",state="RETRY_PENDING"} 0`} {
		want.WriteString("redrive_failures_oldest_age_seconds{" + l + "\n")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), "redrive_failures", "redrive_failures_oldest_age_seconds"); err != nil {
		t.Error(err)
	}
}

// A record that passes validation but that Postgres refuses (here a trigger raises a data
// exception for it) is found by halving the batch and dead-lettered; the rest is stored.
func TestIntakeRecordRefusedByDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.BatchWait = time.Second })
	ctx := context.Background()
	for _, s := range []string{
		`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.error_message = 'poison' THEN
				RAISE EXCEPTION 'poison refused' USING ERRCODE = '22023';
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER refuse_poison BEFORE INSERT ON failure_records FOR EACH ROW EXECUTE FUNCTION refuse_poison()`,
	} {
		if _, err := e.pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []*kafka.Message
	var poisonIdem string
	for i := 0; i < 8; i++ {
		ev := event(avro.Temporary)
		ev.Payload.FailedMessageMetadata = &avro.Metadata{EventID: avro.Ptr("one-message"), Headers: map[string][]byte{}}
		if i == 5 {
			ev.Payload.ErrorMessage = "poison"
			poisonIdem = ev.Identity.IdempotenceID
		}
		topic := errorTopic
		msgs = append(msgs, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: e.encode(ev)})
	}
	e.kafka.Produce(t, msgs...)
	e.start()
	e.waitFor("offsets committed", e.committedAll)
	if n := e.rows(); n != 7 {
		t.Fatalf("%d rows, want 7", n)
	}
	var attempts []int
	rows, err := e.pool.Query(ctx, "SELECT attempt FROM failures ORDER BY attempt")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a int
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, a)
	}
	if fmt.Sprint(attempts) != "[1 2 3 4 5 6 7]" {
		t.Errorf("attempts %v, want 1..7", attempts)
	}
	out := e.kafka.ConsumeN(t, dltTopic, 1, waitLimit)
	dl, err := e.codec.DecodeEvent(dltTopic, out[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if dl.References.Message.Offset != 5 || !strings.Contains(*dl.Payload.ErrorDescription, "check: "+checkRefused) ||
		!strings.Contains(dl.Payload.ErrorMessage, "poison refused") {
		t.Errorf("dead-letter event for offset %d: %q / %q", dl.References.Message.Offset, *dl.Payload.ErrorDescription, dl.Payload.ErrorMessage)
	}
	orig, err := e.codec.DecodeEvent(errorTopic, dl.Payload.OriginalMessage)
	if err != nil || orig.Identity.IdempotenceID != poisonIdem {
		t.Errorf("dead-letter event does not carry the refused record: %v", err)
	}
}

// flakyRegistry is a schema registry that cannot be reached for its first failures look-ups.
type flakyRegistry struct {
	avro.Registry
	mu       sync.Mutex
	failures int
}

func (f *flakyRegistry) SchemaByID(ctx context.Context, subject string, id int) (avro.RegistrySchema, error) {
	f.mu.Lock()
	fail := f.failures > 0
	if fail {
		f.failures--
	}
	f.mu.Unlock()
	if fail {
		return avro.RegistrySchema{}, &url.Error{Op: "Get", URL: "http://registry:8081/schemas/ids/1",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	}
	return f.Registry.SchemaByID(ctx, subject, id)
}

// A record whose schema id cannot be looked up because the registry is unreachable waits for
// the registry; it is not dead-lettered. An id the registry does not know is.
func TestIntakeSchemaRegistryUnavailable(t *testing.T) {
	t.Parallel()
	mock, err := confluentsr.Dial("mock://"+t.Name(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	registry := &flakyRegistry{Registry: mock, failures: 3}
	intakeCodec, err := avro.NewCodec(avro.Config{Registry: registry})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Codec = intakeCodec })
	producerCodec, err := avro.NewCodec(avro.Config{Registry: mock}) // registers the schema
	if err != nil {
		t.Fatal(err)
	}
	ev := event(avro.Permanent)
	framed, err := producerCodec.EncodeEvent(errorTopic, ev)
	if err != nil {
		t.Fatal(err)
	}
	unknownID := bytes.Clone(framed)
	unknownID[1], unknownID[2], unknownID[3], unknownID[4] = 0, 0, 0x7f, 0x7f
	e.produce(framed, unknownID)
	e.start()
	e.waitFor("offsets committed", e.committedAll)
	if n := e.rows(); n != 1 {
		t.Fatalf("%d rows, want the event whose schema the registry served once reachable", n)
	}
	registry.mu.Lock()
	left := registry.failures
	registry.mu.Unlock()
	if left != 0 {
		t.Errorf("registry still has %d failures to give: the look-up was not retried", left)
	}
	e.kafka.ConsumeN(t, dltTopic, 1, waitLimit)
	if got := testutil.ToFloat64(e.intake.metrics.deadLettered.WithLabelValues(string(avro.CheckSchemaID))); got != 1 {
		t.Errorf("dead_lettered{unknown schema id} = %v, want 1 (the unknown id only)", got)
	}
	if err := e.intake.Ready(); err != nil {
		t.Errorf("Ready = %v after the registry answered", err)
	}
}
