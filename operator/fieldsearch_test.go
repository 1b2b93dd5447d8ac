package operator_test

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/google/uuid"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/payload/payloadtest"
	"github.com/redrive/redrive/store"
)

// fieldSecret is in the masked /customer/email of a Protobuf failure of topic "pb-secure".
const fieldSecret = "field-secret-5521@example.com"

// fieldOrder is a Protobuf order (protojson) with the given email.
func fieldOrder(email, sku string) string {
	return `{"id":"o-1","customer":{"name":"Ada","email":"` + email + `"},"total":{"currency":"CHF","units":"1250"},` +
		`"placedAt":"2026-03-01T12:30:00.250Z","lines":[{"sku":"Z-9","quantity":1},{"sku":"` + sku + `","quantity":2}],"quantity":3}`
}

// avroString is the Avro binary encoding of s.
func avroString(s string) []byte {
	return append(binary.AppendVarint(nil, int64(len(s))), s...)
}

// fieldEnv holds failures of every decoded format, written by the registry's own
// serializers (Protobuf, JSON Schema) or framed with a registered Avro schema.
type fieldEnv struct {
	c                           *operator.Core
	s                           *store.Store
	proto, jsonSchema, avro, js uuid.UUID
	single                      uuid.UUID
	payloads                    *payload.Decoder
	masked, garbage             uuid.UUID
	bounds                      redrive.Filter
}

func newFieldEnv(t *testing.T, mod func(*operator.Config)) *fieldEnv {
	t.Helper()
	reg := payloadtest.Registry(t)
	const avroSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"id","type":"string"},{"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"email","type":"string"}]}}]}`
	avroID, err := reg.Client().Register("av-value", schemaregistry.SchemaInfo{Schema: avroSchema}, false)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := avro.CompileSchema(avroSchema)
	if err != nil {
		t.Fatal(err)
	}
	d, err := payload.New(payload.Config{Registry: reg, Schemas: []string{avroSchema}})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := masking.Parse(strings.NewReader("pb-secure json /customer/email\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	c, s := newCore(t, func(cfg *operator.Config) {
		cfg.Payloads, cfg.Masking = d, rules
		if mod != nil {
			mod(cfg)
		}
	})
	pool := s.Pool()
	insert := func(topic string, v []byte) uuid.UUID {
		return testkit.InsertFailure(t, pool, testkit.FailureRow{Topic: topic, Value: v, State: redrive.StatePermanent})
	}
	e := &fieldEnv{c: c, s: s, payloads: d}
	e.proto = insert("pb", payloadtest.Protobuf(t, reg, "pb", "shop.Order", fieldOrder("ada@example.com", "A-1")))
	e.jsonSchema = insert("js", payloadtest.JSONSchema(t, reg, "js", payloadtest.Order{ID: "o-2",
		Customer: payloadtest.Customer{Name: "Eve", Email: "eve@example.com"}, Quantity: 2}))
	framed := binary.BigEndian.AppendUint32([]byte{0}, uint32(avroID))
	framed = append(append(framed, avroString("o-3")...), avroString("avi@example.com")...)
	e.avro = insert("av", framed)
	fp := sc.Fingerprint()
	single := append(append([]byte{0xc3, 0x01}, fp[:]...), append(avroString("o-4"), avroString("sol@example.com")...)...)
	e.single = insert("av-single", single)
	e.js = insert("plain", []byte(`{"customer":{"email":"jo@example.com","vip":true},"lines":[{"sku":"A-1"}]}`))
	e.masked = insert("pb-secure", payloadtest.Protobuf(t, reg, "pb-secure", "shop.Order", fieldOrder(fieldSecret, "S-1")))
	e.garbage = insert("plain", []byte{0, 1, 2, 3, 4, 5, 6, 7})
	now := time.Now()
	e.bounds = redrive.Filter{CreatedFrom: now.Add(-2 * time.Hour), CreatedTo: now.Add(2 * time.Hour)}
	return e
}

// search lists every page of f for reader, following the cursor, and returns the ids found.
func (e *fieldEnv) search(t *testing.T, f redrive.Filter, reader operator.Reader, limit int) ([]uuid.UUID, error) {
	t.Helper()
	var (
		ids    []uuid.UUID
		cursor string
	)
	for range 100 {
		p, err := e.c.ListFailures(context.Background(), operator.ListRequest{Filter: f, Limit: limit, Cursor: cursor, Reader: reader})
		if err != nil {
			return nil, err
		}
		if p.FieldScan == nil {
			t.Fatal("a decoded field search reports no scan")
		}
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if cursor = p.Next; cursor == "" {
			return ids, nil
		}
	}
	t.Fatal("the pages do not end")
	return nil, nil
}

func (e *fieldEnv) with(ptr, value, contains string) redrive.Filter {
	f := e.bounds
	f.PayloadField, f.PayloadFieldValue, f.PayloadFieldContains = ptr, value, contains
	return f
}

func sameIDs(got []uuid.UUID, want ...uuid.UUID) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	slices.SortFunc(a, func(x, y uuid.UUID) int { return strings.Compare(x.String(), y.String()) })
	slices.SortFunc(b, func(x, y uuid.UUID) int { return strings.Compare(x.String(), y.String()) })
	return slices.Equal(a, b)
}

// A decoded field is found in every format the decoder decodes: Protobuf (protojson: nested
// messages, repeated fields, int64 as a string, Timestamp as RFC 3339), JSON Schema, Avro
// from the registry and plain JSON; by presence, exact value, part of it, array index and
// wildcard. A value that does not decode matches nothing.
func TestFieldSearchEveryFormat(t *testing.T) {
	t.Parallel()
	e := newFieldEnv(t, nil)
	for _, tc := range []struct {
		name                 string
		ptr, value, contains string
		want                 []uuid.UUID
	}{
		{"protobuf nested", "/customer/email", "ada@example.com", "", []uuid.UUID{e.proto}},
		{"json schema", "/customer/email", "eve@example.com", "", []uuid.UUID{e.jsonSchema}},
		{"avro", "/customer/email", "avi@example.com", "", []uuid.UUID{e.avro}},
		{"avro single-object", "/customer/email", "sol@example.com", "", []uuid.UUID{e.single}},
		{"plain json", "/customer/email", "jo@example.com", "", []uuid.UUID{e.js}},
		{"contains, every format", "/customer/email", "", "@example.com", []uuid.UUID{e.proto, e.jsonSchema, e.avro, e.single, e.js}},
		{"presence", "/customer/email", "", "", []uuid.UUID{e.proto, e.jsonSchema, e.avro, e.single, e.js, e.masked}},
		{"absent field", "/customer/phone", "", "", nil},
		{"wildcard over a repeated field", "/lines/*/sku", "A-1", "", []uuid.UUID{e.proto, e.js}},
		{"index", "/lines/1/sku", "A-1", "", []uuid.UUID{e.proto}},
		{"index out of range", "/lines/2/sku", "", "", nil},
		{"int32 by its JSON text", "/quantity", "3", "", []uuid.UUID{e.proto, e.masked}},
		{"int64 as protojson's string", "/total/units", "1250", "", []uuid.UUID{e.proto, e.masked}},
		{"timestamp as RFC 3339", "/placedAt", "2026-03-01T12:30:00.250Z", "", []uuid.UUID{e.proto, e.masked}},
		{"bool", "/customer/vip", "true", "", []uuid.UUID{e.js}},
		{"json schema number", "/quantity", "2", "", []uuid.UUID{e.jsonSchema}},
		{"object matches presence only", "/customer", "", "example", nil},
	} {
		got, err := e.search(t, e.with(tc.ptr, tc.value, tc.contains), admin, 50)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !sameIDs(got, tc.want...) {
			t.Errorf("%s: found %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The scan says what it read: every candidate, and the one whose value decodes in no format.
func TestFieldSearchScanReport(t *testing.T) {
	t.Parallel()
	e := newFieldEnv(t, nil)
	p, err := e.c.ListFailures(context.Background(), operator.ListRequest{Filter: e.with("/customer/email", "", ""), Reader: admin})
	if err != nil {
		t.Fatal(err)
	}
	if p.FieldScan == nil || p.FieldScan.Scanned != 7 || p.FieldScan.Undecoded != 1 || p.FieldScan.Limited || p.Next != "" || len(p.Items) != 6 {
		t.Errorf("scan %+v, next %q, %d items; want 7 scanned, 1 undecoded, not limited, the last page of 6", p.FieldScan, p.Next, len(p.Items))
	}
}

// A masked field is never an oracle: its secret matches nothing, by value or by any part of
// it, for every principal; one without the payload permission is refused with the same answer
// whatever the term.
func TestFieldSearchMaskedIsNoOracle(t *testing.T) {
	t.Parallel()
	e := newFieldEnv(t, nil)
	topic := e.with("/customer/email", "", "")
	topic.Topic = "pb-secure"
	for _, reader := range []operator.Reader{admin, {Principal: "vera", Payload: true}} {
		for _, f := range []redrive.Filter{
			e.with("/customer/email", fieldSecret, ""), e.with("/customer/email", "", "secret"),
			e.with("/customer/email", "", fieldSecret[:6]), e.with("/*/email", fieldSecret, ""),
			func() redrive.Filter { f := topic; f.PayloadFieldValue = fieldSecret; return f }(),
		} {
			got, err := e.search(t, f, reader, 50)
			if err != nil || len(got) != 0 {
				t.Errorf("%s searching %+v: %v, %v; want nothing", reader.Principal, f, got, err)
			}
			res, err := e.c.Act(context.Background(), operator.ActionRequest{Action: operator.Close, DryRun: true, Principal: reader.Principal,
				Payload: true, Selection: operator.Selection{Filter: &f}})
			if err != nil || res.Matched != 0 {
				t.Errorf("%s dry run %+v: %+v, %v; want 0", reader.Principal, f, res, err)
			}
		}
		// The control: the field is there (masked), and its unmasked neighbour is found.
		if got, _ := e.search(t, topic, reader, 50); !sameIDs(got, e.masked) {
			t.Errorf("presence on pb-secure: %v", got)
		}
		f := topic
		f.PayloadField, f.PayloadFieldValue = "/lines/1/sku", "S-1"
		if got, _ := e.search(t, f, reader, 50); !sameIDs(got, e.masked) {
			t.Errorf("unmasked field on pb-secure: %v", got)
		}
	}
	// The secret is there: the same search without the masking rules finds it.
	unmasked, err := operator.New(operator.Config{Store: e.s, Payloads: e.payloads})
	if err != nil {
		t.Fatal(err)
	}
	p, err := unmasked.ListFailures(context.Background(), operator.ListRequest{Filter: e.with("/customer/email", fieldSecret, ""), Reader: admin})
	if err != nil || len(p.Items) != 1 || p.Items[0].ID != e.masked {
		t.Fatalf("without masking rules: %+v, %v; the test's secret is not where it should be", p, err)
	}
	// Without the payload permission: refused, byte for byte the same for the secret and a guess.
	nobody := operator.Reader{Principal: "nina"}
	var first string
	for i, term := range []string{fieldSecret, "field-guess-0000@example.com", ""} {
		f := e.with("/customer/email", term, "")
		_, err := e.c.ListFailures(context.Background(), operator.ListRequest{Filter: f, Reader: nobody})
		var ie *operator.InputError
		if !errors.As(err, &ie) || !ie.Forbidden || ie.Field != operator.ParamPayloadField {
			t.Fatalf("term %q: %v, want a forbidden error on payload_field", term, err)
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Errorf("term %q: %q, the secret got %q", term, err, first)
		}
		if _, err := e.c.CountFailures(context.Background(), f, nobody); !errors.Is(err, redrive.ErrPayloadForbidden) || err.Error() != first {
			t.Errorf("count: %v", err)
		}
		if _, err := e.c.Export(context.Background(), f, nobody, func([]byte) error { return nil }); err == nil || err.Error() != first {
			t.Errorf("export: %v", err)
		}
		if _, err := e.c.PreviewJob(context.Background(), operator.JobRequest{Action: operator.Close, Reason: "r", Principal: "nina",
			Selection: operator.Selection{Filter: &f}}); err == nil || err.Error() != first {
			t.Errorf("job preview: %v", err)
		}
	}
}

// Bad input is refused naming its field: an unbounded search, a bad pointer, a term without a
// pointer, both terms, and a total.
func TestFieldSearchRefusals(t *testing.T) {
	t.Parallel()
	e := newFieldEnv(t, nil)
	ctx := context.Background()
	unbounded := redrive.Filter{PayloadField: "/customer/email", PayloadFieldValue: "x"}
	for _, tc := range []struct {
		name  string
		err   func() error
		field string
	}{
		{"unbounded list", func() error {
			_, err := e.c.ListFailures(ctx, operator.ListRequest{Filter: unbounded, Reader: admin})
			return err
		}, "payload_field"},
		{"unbounded parse", func() error {
			_, err := operator.ParseFilter(map[string][]string{"payload_field": {"/customer/email"}})
			return err
		}, "payload_field"},
		{"bad pointer", func() error {
			_, err := operator.ParseFilter(map[string][]string{"topic": {"pb"}, "payload_field": {"customer/email"}})
			return err
		}, "payload_field"},
		{"bad escape", func() error {
			_, err := operator.ParseFilter(map[string][]string{"topic": {"pb"}, "payload_field": {"/a~2"}})
			return err
		}, "payload_field"},
		{"value without pointer", func() error {
			_, err := operator.ParseFilter(map[string][]string{"topic": {"pb"}, "payload_field_value": {"x"}})
			return err
		}, "payload_field_value"},
		{"both terms", func() error {
			_, err := operator.ParseFilter(map[string][]string{"topic": {"pb"}, "payload_field": {"/a"}, "payload_field_value": {"x"}, "payload_field_contains": {"y"}})
			return err
		}, "payload_field_contains"},
		{"total", func() error {
			_, err := e.c.ListFailures(ctx, operator.ListRequest{Filter: e.with("/a", "", ""), Total: true, Reader: admin})
			return err
		}, "payload_field"},
	} {
		err := tc.err()
		var ie *operator.InputError
		if !errors.As(err, &ie) || ie.Field != tc.field || ie.Status() != 400 {
			t.Errorf("%s: %v, want a 400 on %s", tc.name, err, tc.field)
		}
	}
	// The store never answers a filter it would widen.
	if _, _, err := e.s.ListFailures(ctx, store.ListParams{Filter: e.with("/a", "", ""), Limit: 10}); err == nil {
		t.Error("the store listed a decoded field search")
	}
}

// A request decodes at most MaxFieldScan candidates: a page stops there with a cursor that
// continues the scan, and following it finds every match exactly once; an action or a job
// whose bounds hold more candidates is refused.
func TestFieldSearchCandidateCap(t *testing.T) {
	t.Parallel()
	e := newFieldEnv(t, func(cfg *operator.Config) { cfg.MaxFieldScan = 2 })
	ctx := context.Background()
	f := e.with("/customer/email", "", "@example.com")
	p, err := e.c.ListFailures(ctx, operator.ListRequest{Filter: f, Limit: 50, Reader: admin})
	if err != nil {
		t.Fatal(err)
	}
	if p.FieldScan.Scanned != 2 || !p.FieldScan.Limited || p.Next == "" {
		t.Errorf("first page: %+v scan %+v next %q; want 2 scanned, limited, a cursor", p.Items, p.FieldScan, p.Next)
	}
	for _, limit := range []int{1, 2, 50} {
		got, err := e.search(t, f, admin, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !sameIDs(got, e.proto, e.jsonSchema, e.avro, e.single, e.js) || len(got) != 5 {
			t.Errorf("limit %d: found %v", limit, got)
		}
	}
	var ie *operator.InputError
	_, err = e.c.Act(ctx, operator.ActionRequest{Action: operator.Close, DryRun: true, Principal: "ada", Payload: true, Selection: operator.Selection{Filter: &f}})
	if !errors.As(err, &ie) || ie.Field != operator.ParamPayloadField || !ie.Unprocessable {
		t.Errorf("dry run over the cap: %v", err)
	}
	_, err = e.c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Reason: "r", Principal: "ada", Payload: true, Selection: operator.Selection{Filter: &f}})
	if !errors.As(err, &ie) || ie.Field != operator.ParamPayloadField {
		t.Errorf("job over the cap: %v", err)
	}
}

// Actions, jobs and exports by a decoded field search act on exactly its matches.
func TestFieldSearchActionsJobsExport(t *testing.T) {
	t.Parallel()
	e := newFieldEnv(t, nil)
	ctx := context.Background()
	f := e.with("/lines/*/sku", "A-1", "")
	want := []uuid.UUID{e.proto, e.js}

	res, err := e.c.Act(ctx, operator.ActionRequest{Action: operator.Close, DryRun: true, Principal: "ada", Payload: true, Selection: operator.Selection{Filter: &f}})
	if err != nil || res.Matched != 2 {
		t.Fatalf("dry run: %+v, %v", res, err)
	}

	prev, err := e.c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Reason: "r", Principal: "ada", Payload: true, Selection: operator.Selection{Filter: &f}})
	if err != nil {
		t.Fatal(err)
	}
	items, err := e.c.JobItems(ctx, operator.JobItemsRequest{JobID: prev.Job.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var pinned []uuid.UUID
	for _, it := range items.Items {
		pinned = append(pinned, it.FailureID)
	}
	if prev.Job.Total != 2 || !sameIDs(pinned, want...) {
		t.Errorf("job pinned %v (total %d), want %v", pinned, prev.Job.Total, want)
	}
	// The terms are hidden where the payload terms are: here, for everyone, since some
	// topic's values are masked; a selection within an unmasked topic shows them.
	if sel, _ := prev.Job.Selection["filter"].(map[string]any); sel[operator.ParamPayloadField] != operator.HiddenTerm || sel[operator.ParamPayloadFieldValue] != operator.HiddenTerm {
		t.Errorf("job selection %v shows the terms", prev.Job.Selection)
	}
	plain := f
	plain.Topic = "pb"
	prevPlain, err := e.c.PreviewJob(ctx, operator.JobRequest{Action: operator.Close, Reason: "r", Principal: "ada", Payload: true, Selection: operator.Selection{Filter: &plain}})
	if err != nil {
		t.Fatal(err)
	}
	if sel, _ := prevPlain.Job.Selection["filter"].(map[string]any); prevPlain.Job.Total != 1 || sel[operator.ParamPayloadField] != "/lines/*/sku" || sel[operator.ParamPayloadFieldValue] != "A-1" {
		t.Errorf("job within an unmasked topic: total %d, selection %v", prevPlain.Job.Total, prevPlain.Job.Selection)
	}
	job, err := e.c.Job(ctx, prevPlain.Job.ID, operator.Reader{Principal: "nina"})
	if err != nil {
		t.Fatal(err)
	}
	if sel, _ := job.Selection["filter"].(map[string]any); sel[operator.ParamPayloadFieldValue] != operator.HiddenTerm || sel[operator.ParamPayloadField] != operator.HiddenTerm {
		t.Errorf("job selection for a reader without the payload permission: %v", job.Selection)
	}

	var lines []string
	if _, err := e.c.Export(ctx, f, admin, func(b []byte) error { lines = append(lines, string(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || !strings.Contains(strings.Join(lines, ""), e.proto.String()) || !strings.Contains(strings.Join(lines, ""), e.js.String()) {
		t.Errorf("export wrote %d lines, want the 2 matches", len(lines))
	}

	if n, err := e.c.CountFailures(ctx, f, admin); err != nil || n != 2 {
		t.Errorf("count: %d, %v", n, err)
	}

	res, err = e.c.Act(ctx, operator.ActionRequest{Action: operator.Close, Reason: "matched", Principal: "ada", Payload: true, Selection: operator.Selection{Filter: &f}})
	if err != nil || res.Matched != 2 || res.Counts[redrive.OutcomeClosed] != 2 {
		t.Fatalf("close: %+v, %v", res, err)
	}
	if got := states(t, e.s.Pool(), []uuid.UUID{e.proto, e.js, e.jsonSchema, e.avro, e.single, e.masked}); got[redrive.StateClosed] != 2 || got[redrive.StatePermanent] != 4 {
		t.Errorf("states after the close: %v", got)
	}
}

// BenchmarkFieldSearchList measures a list request whose decoded field search scans 1,000
// registry-framed Protobuf candidates and matches none (so every candidate is read and
// decoded), side by side with a raw payload search of the same rows.
func BenchmarkFieldSearchList(b *testing.B) {
	reg := payloadtest.Registry(b)
	d, err := payload.New(payload.Config{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	pool := testkit.Postgres(b)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	c, err := operator.New(operator.Config{Store: s, Payloads: d})
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	v := payloadtest.Protobuf(b, reg, "pb", "shop.Order", fieldOrder("ada@example.com", "A-1"))
	for range n {
		testkit.InsertFailure(b, pool, testkit.FailureRow{Topic: "pb", Value: v, State: redrive.StatePermanent})
	}
	for _, tc := range []struct {
		name string
		f    redrive.Filter
	}{
		{"decoded", redrive.Filter{Topic: "pb", PayloadField: "/customer/email", PayloadFieldValue: "nobody@example.com"}},
		{"raw", redrive.Filter{Topic: "pb", Payload: []byte("nobody@example.com")}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := c.ListFailures(context.Background(), operator.ListRequest{Filter: tc.f, Limit: 50, Reader: admin})
				if err != nil || len(p.Items) != 0 {
					b.Fatal(p, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "candidates/s")
		})
	}
}
