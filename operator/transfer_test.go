package operator_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
)

var admin = operator.Reader{Principal: "ada", Payload: true}

// digest sums up every stored field of every failure, and the groups' kinds, tickets and notes.
func digest(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var d string
	err := pool.QueryRow(context.Background(), `
		SELECT coalesce(md5(string_agg(
			f.id::text || f.state || coalesce(f.state_reason, '~') || f.temporality || f.error_code || f.error_message ||
			coalesce(f.error_description, '~') || coalesce(f.stack_trace, '~') || coalesce(f.stack_trace_hash, '~') ||
			f.event_id || f.idempotence_id || f.event_created::text || f.publisher_system || f.publisher_service ||
			f.original_topic || f.original_partition::text || f.original_offset::text ||
			coalesce(encode(f.original_key, 'hex'), '~') || coalesce(encode(f.original_value, 'hex'), '~') ||
			array_to_string(f.header_names, ',', '~') || coalesce((SELECT string_agg(coalesce(encode(v, 'hex'), '~'), ',' ORDER BY o)
				FROM unnest(f.header_values) WITH ORDINALITY AS h(v, o)), '') ||
			coalesce(f.message_type, '~') || f.causing_message || f.attempt::text || coalesce(f.closed_reason, '~') ||
			f.source_format || coalesce(f.source_topic, '~') || f.cluster || f.created_at::text || f.updated_at::text ||
			g.publisher_service || g.message_type || g.error_code || g.stack_trace_hash || coalesce(g.ticket, '~'),
			'|' ORDER BY f.id)), '')
		FROM failures f JOIN failure_groups g ON g.id = f.group_id`).Scan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// seedTransfer stores n failures of every shape: binary and null keys, empty values,
// tombstones, duplicate and null headers.
func seedTransfer(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := context.Background()
	for _, r := range []testkit.FailureRow{
		{Key: []byte{0xff, 0x00}, Value: []byte{0x00, 0xc3, 0x01, 0xff}, HeaderNames: []string{"a", "a", "n"}, HeaderValues: [][]byte{[]byte("1"), []byte("2"), nil}},
		{NullKey: true, Value: []byte{}},
		{Key: []byte{}, Value: []byte(`{"x":"ü"}`), State: redrive.StateClosed},
		{Key: []byte("tomb"), State: redrive.StateResent},
	} {
		testkit.InsertFailure(t, pool, r)
	}
	if _, err := pool.Exec(ctx, `UPDATE failures SET original_value = NULL WHERE original_key = 'tomb'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE failure_groups SET ticket = 'OPS-9'`); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		var gid int64
		if err := pool.QueryRow(ctx, "SELECT min(id) FROM failure_groups").Scan(&gid); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `
			INSERT INTO failures (state, temporality, error_code, error_message, event_id, idempotence_id, event_created,
				publisher_system, publisher_service, original_topic, original_partition, original_offset, original_key,
				original_value, header_names, header_values, causing_message, group_id, source_format, source_topic, source_partition, source_offset)
			SELECT 'PERMANENT', 'PERMANENT', 'BULK', 'bulk ' || i, 'e-' || i, 'i-' || i, now(), 'sys', 'svc', 'bulk', i % 6, i,
				convert_to('k-' || i, 'UTF8'), decode(md5(i::text) || md5((i+1)::text), 'hex'), '{trace}', ARRAY[convert_to('t-' || i, 'UTF8')],
				'c-' || i, $2, 'spring', 'bulk.DLT', 0, i
			FROM generate_series(1, $1) AS i`, n, gid); err != nil {
			t.Fatal(err)
		}
	}
}

// Export then import into another database: every field and byte comes back, and importing
// again changes nothing; memory stays bounded while 100,000 failures stream.
//
// Not parallel: the heap bound reads the process's heap, which other tests would share.
func TestExportImportRoundTrip(t *testing.T) {
	// 100,000 failures; under the race detector (as CI runs), 10,000.
	n := int64(100000)
	if raceOn {
		n = 10000
	}
	src, srcStore := newCore(t, nil)
	seedTransfer(t, srcStore.Pool(), int(n))
	dst, dstStore := newCore(t, nil)
	ctx := context.Background()

	f, err := os.CreateTemp(t.TempDir(), "export-*.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	h := sha256.New()
	peak := watchHeap(t)
	start := time.Now()
	res, err := src.Export(ctx, redrive.Filter{}, admin, func(line []byte) error {
		h.Write(line)
		_, err := w.Write(line)
		return err
	})
	if err != nil || res.Records != n+4 {
		t.Fatalf("export = %+v, %v", res, err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st, _ := f.Stat()
	if got := peak(); got > 64<<20 {
		t.Errorf("export of %d MB held %d MB of heap at most, want it bounded", st.Size()>>20, got>>20)
	}
	t.Logf("exported %d failures, %d MB, in %s (sha256 %x)", res.Records, st.Size()>>20, took, h.Sum(nil)[:4])
	reopen := func() io.Reader {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		return bufio.NewReader(f)
	}
	dry, err := dst.Import(ctx, reopen(), true, "ada")
	if err != nil || dry.Read != n+4 || dry.Inserted != n+4 {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if got := digest(t, dstStore.Pool()); got != "" {
		t.Fatal("a dry run stored something")
	}
	start = time.Now()
	got, err := dst.Import(ctx, reopen(), false, "ada")
	t.Logf("imported in %s", time.Since(start))
	if err != nil || got.Inserted != n+4 || got.Skipped != 0 {
		t.Fatalf("import = %+v, %v", got, err)
	}
	if a, b := digest(t, srcStore.Pool()), digest(t, dstStore.Pool()); a != b {
		t.Fatal("the imported failures differ from the exported ones")
	}
	again, err := dst.Import(ctx, reopen(), false, "ada")
	if err != nil || again.Inserted != 0 || again.Skipped != n+4 {
		t.Errorf("second import = %+v, %v", again, err)
	}
}

// Failures of two clusters export with their cluster and import into it; a line without a
// cluster (an export from before clusters had names) imports into the default cluster, and a
// line with a bad cluster name is refused naming the field.
func TestExportImportClusters(t *testing.T) {
	t.Parallel()
	src, srcStore := newCore(t, nil)
	seedTransfer(t, srcStore.Pool(), 0)
	ctx := context.Background()
	if _, err := srcStore.Pool().Exec(ctx, `UPDATE failures SET cluster = 'east' WHERE state IN ('CLOSED', 'RESENT')`); err != nil {
		t.Fatal(err)
	}
	clusters := func(pool *pgxpool.Pool) map[string]string {
		rows, err := pool.Query(ctx, `SELECT idempotence_id, cluster FROM failures`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for rows.Next() {
			var id, c string
			if err := rows.Scan(&id, &c); err != nil {
				t.Fatal(err)
			}
			out[id] = c
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var file bytes.Buffer
	if _, err := src.Export(ctx, redrive.Filter{}, admin, func(l []byte) error { _, err := file.Write(l); return err }); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(file.String(), `"cluster":"east"`); n != 2 {
		t.Errorf("%d lines name cluster east, want 2:\n%s", n, file.String())
	}
	if n := strings.Count(file.String(), `"cluster":"default"`); n != 2 {
		t.Errorf("%d lines name cluster default, want 2", n)
	}
	dst, dstStore := newCore(t, nil)
	if res, err := dst.Import(ctx, bytes.NewReader(file.Bytes()), false, "ada"); err != nil || res.Inserted != 4 {
		t.Fatalf("import = %+v, %v", res, err)
	}
	want := clusters(srcStore.Pool())
	if got := clusters(dstStore.Pool()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("imported clusters %v, want %v", got, want)
	}
	if a, b := digest(t, srcStore.Pool()), digest(t, dstStore.Pool()); a != b {
		t.Error("the imported failures differ from the exported ones")
	}

	// Old exports carry no cluster: their failures are the default cluster's.
	old := strings.ReplaceAll(file.String(), `,"cluster":"east"`, "")
	old = strings.ReplaceAll(old, `,"cluster":"default"`, "")
	if strings.Contains(old, `"cluster"`) {
		t.Fatal("the cluster field was not removed")
	}
	legacy, legacyStore := newCore(t, nil)
	if res, err := legacy.Import(ctx, strings.NewReader(old), false, "ada"); err != nil || res.Inserted != 4 {
		t.Fatalf("import of an export without clusters = %+v, %v", res, err)
	}
	for id, c := range clusters(legacyStore.Pool()) {
		if c != redrive.DefaultCluster {
			t.Errorf("failure %s imported into cluster %q, want %q", id, c, redrive.DefaultCluster)
		}
	}

	bad := strings.Replace(file.String(), `"cluster":"east"`, `"cluster":"East<b>"`, 1)
	_, err := legacy.Import(ctx, strings.NewReader(bad), true, "ada")
	var ie *operator.InputError
	if !errors.As(err, &ie) || !strings.Contains(ie.Error(), "cluster") {
		t.Errorf("import of a bad cluster name = %v, want an input error naming cluster", err)
	}
}

// watchHeap samples the heap in use until the returned function is called, which returns the
// highest sample.
func watchHeap(t *testing.T) func() uint64 {
	var (
		peak atomic.Uint64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	runtime.GC()
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	done := func() uint64 {
		once.Do(func() { close(stop); wg.Wait() })
		return peak.Load()
	}
	t.Cleanup(func() { done() })
	return done
}

// A malformed line is refused with its number, and nothing is stored.
func TestImportRefusesBadLines(t *testing.T) {
	t.Parallel()
	src, srcStore := newCore(t, nil)
	seedTransfer(t, srcStore.Pool(), 0)
	var file bytes.Buffer
	if _, err := src.Export(context.Background(), redrive.Filter{}, admin, func(l []byte) error { _, err := file.Write(l); return err }); err != nil {
		t.Fatal(err)
	}
	good := strings.Split(strings.TrimSpace(file.String()), "\n")
	dst, dstStore := newCore(t, nil)
	for name, c := range map[string]struct {
		line string
		at   int
	}{
		"not JSON":         {"{oops", 3},
		"unknown member":   {strings.Replace(good[0], `"format"`, `"colour":1,"format"`, 1), 3},
		"duplicate member": {strings.Replace(good[0], `"format"`, `"attempt":2,"format"`, 1), 3},
		"bad state":        {strings.Replace(good[0], `"state":"PERMANENT"`, `"state":"GONE"`, 1), 3},
		"bad offset":       {strings.Replace(good[0], `"offset":"`, `"offset":"x`, 1), 3},
		"bad base64":       {strings.Replace(good[0], `"value":"`, `"value":"!!`, 1), 3},
		"wrong format":     {strings.Replace(good[0], operator.TransferFormat, "redrive.failure.v0", 1), 3},
		"hidden payload":   {strings.Replace(good[0], `"format"`, `"payload_hidden":true,"format"`, 1), 3},
	} {
		in := good[0] + "\n" + good[1] + "\n" + c.line + "\n" + good[2] + "\n"
		_, err := dst.Import(context.Background(), strings.NewReader(in), false, "ada")
		var ie *operator.InputError
		if !errors.As(err, &ie) || ie.Field != fmt.Sprintf("line %d", c.at) {
			t.Errorf("%s: %v, want an input error on line %d", name, err, c.at)
		}
	}
	if d := digest(t, dstStore.Pool()); d != "" {
		t.Error("a refused import stored something")
	}
	// A line over the bound.
	huge := `{"format":"` + strings.Repeat("x", operator.MaxTransferLine+10) + `"}`
	if _, err := dst.Import(context.Background(), io.MultiReader(strings.NewReader(good[0]+"\n"), strings.NewReader(huge)), false, "ada"); err == nil ||
		!strings.Contains(err.Error(), "line 2") {
		t.Errorf("huge line: %v", err)
	}
	// Blank lines are fine.
	if res, err := dst.Import(context.Background(), bufio.NewReader(strings.NewReader("\n"+good[0]+"\n\n")), false, "ada"); err != nil || res.Inserted != 1 {
		t.Errorf("blank lines: %+v, %v", res, err)
	}
}

// An export without the payload permission carries no payload; with masking rules, masked
// payloads; the export is audited.
func TestExportViews(t *testing.T) {
	t.Parallel()
	rules, err := masking.Parse(strings.NewReader("orders json /x"), "test")
	if err != nil {
		t.Fatal(err)
	}
	c, s := newCore(t, func(cfg *operator.Config) { cfg.Masking = rules })
	seedTransfer(t, s.Pool(), 0)
	var hidden, masked bytes.Buffer
	if _, err := c.Export(context.Background(), redrive.Filter{}, operator.Reader{Principal: "vic"}, func(l []byte) error { hidden.Write(l); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(hidden.String(), `"value":"`) || !strings.Contains(hidden.String(), `"payload_hidden":true`) {
		t.Errorf("export without the payload permission holds payloads: %s", hidden.String()[:200])
	}
	if _, err := c.Export(context.Background(), redrive.Filter{}, admin, func(l []byte) error { masked.Write(l); return nil }); err != nil {
		t.Fatal(err)
	}
	// {"x":"ü"} is masked to {"x":"**"} (ü is two bytes): base64 of that.
	if !strings.Contains(masked.String(), `"masked":true`) || strings.Contains(masked.String(), "eyJ4Ijoiw7wifQ") {
		t.Errorf("masked export = %s", masked.String())
	}
	var n int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE action = 'export'").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d export audit entries (%v), want 2", n, err)
	}
}
