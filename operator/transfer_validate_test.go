package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/operator"
)

// edited returns the export line with the members of set replaced (a path "group.note" sets a
// member of a member; a nil value removes the member).
func edited(t *testing.T, line string, set map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	for path, v := range set {
		obj, name := m, path
		if parent, child, ok := strings.Cut(path, "."); ok {
			obj, name = m[parent].(map[string]any), child
		}
		if v == nil {
			delete(obj, name)
		} else {
			obj[name] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exportLines exports every failure of c as admin and returns the lines.
func exportLines(t *testing.T, c *operator.Core, reader operator.Reader) []string {
	t.Helper()
	var file bytes.Buffer
	if _, err := c.Export(context.Background(), redrive.Filter{}, reader, func(l []byte) error { _, err := file.Write(l); return err }); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(file.String()), "\n")
}

// Import applies the intake's rules and the group's limits, and refuses masked or hidden
// records: each refusal names the line and the field, as an input error (a 4xx for the API and
// the UI), and nothing of the file is stored.
func TestImportValidatesRecords(t *testing.T) {
	t.Parallel()
	src, srcStore := newCore(t, nil)
	seedTransfer(t, srcStore.Pool(), 0)
	good := exportLines(t, src, admin)
	dst, dstStore := newCore(t, nil)
	long := func(n int) string { return strings.Repeat("t", n) }
	for name, c := range map[string]struct {
		set   map[string]any
		field string // the field the detail names after the line
	}{
		"10,000-character topic":     {map[string]any{"topic": long(10000)}, "topic"},
		"NUL in the error message":   {map[string]any{"error_message": "bad\x00byte"}, "error_message"},
		"NUL in the stack trace":     {map[string]any{"stack_trace": "at x\x00"}, "stack_trace"},
		"NUL in the event id":        {map[string]any{"event_id": "e\x00"}, "event_id"},
		"NUL in the idempotence id":  {map[string]any{"idempotence_id": "i\x00"}, "idempotence_id"},
		"long idempotence id":        {map[string]any{"idempotence_id": long(redrive.MaxKeyText + 1)}, "idempotence_id"},
		"NUL in the publisher":       {map[string]any{"publisher_system": "s\x00"}, "publisher_system"},
		"long publisher service":     {map[string]any{"publisher_service": long(redrive.MaxKeyText + 1)}, "publisher_service"},
		"NUL in the message type":    {map[string]any{"message.type": "T\x00"}, "message.type"},
		"NUL in a header name":       {map[string]any{"headers": []any{map[string]any{"name": "h\x00", "value": nil}}}, "headers[0].name"},
		"NUL in the causing message": {map[string]any{"causing_message": "c\x00"}, "causing_message"},
		"long causing message":       {map[string]any{"causing_message": long(redrive.MaxKeyText + 1)}, "causing_message"},
		"NUL in the state reason":    {map[string]any{"state_reason": "r\x00"}, "state_reason"},
		"NUL in the closing reason":  {map[string]any{"closed_reason": "r\x00"}, "closed_reason"},
		"NUL in the source topic":    {map[string]any{"source.topic": "s\x00", "source.partition": 0, "source.offset": "1"}, "source.topic"},
		"half a source position":     {map[string]any{"source.topic": "s", "source.partition": nil, "source.offset": nil}, "source"},
		"NUL in the group's note":    {map[string]any{"group.note": "n\x00"}, "group.note"},
		"10,001-character note":      {map[string]any{"group.note": long(redrive.MaxNoteLen + 1)}, "group.note"},
		"201-character ticket":       {map[string]any{"group.ticket": long(redrive.MaxTicketLen + 1)}, "group.ticket"},
		"NUL in the group's kind":    {map[string]any{"group.error_code": "E\x00"}, "group.error_code"},
		"long group key":             {map[string]any{"group.message_type": long(redrive.MaxGroupKey)}, "group"},
		"pending without next":       {map[string]any{"state": "RETRY_PENDING", "next_attempt_at": nil}, "next_attempt_at"},
		"closed without reason":      {map[string]any{"state": "CLOSED", "closed_reason": nil}, "closed_reason"},
		"event created in year 0":    {map[string]any{"event_created": "0000-01-01T00:00:00Z"}, "event_created"},
		"masked":                     {map[string]any{"masked": true}, "masked"},
		"hidden payload":             {map[string]any{"payload_hidden": true, "key": nil, "value": nil}, "payload_hidden"},
	} {
		t.Run(name, func(t *testing.T) {
			in := good[0] + "\n\n" + edited(t, good[1], c.set) + "\n" + good[2] + "\n"
			_, err := dst.Import(context.Background(), strings.NewReader(in), false, "ada")
			var ie *operator.InputError
			if !errors.As(err, &ie) || ie.Field != "line 3" || ie.Status() >= 500 {
				t.Fatalf("%v, want an input error on line 3", err)
			}
			if !strings.Contains(ie.Detail, c.field) {
				t.Errorf("%q does not name %s", ie.Error(), c.field)
			}
		})
	}
	// Bytes that are not UTF-8 in a text field (JSON encoders never write them; a file may).
	raw := strings.Replace(good[1], `"error_message":"`, "\"error_message\":\"\xff", 1)
	var ie *operator.InputError
	if _, err := dst.Import(context.Background(), strings.NewReader(good[0]+"\n"+raw+"\n"), false, "ada"); !errors.As(err, &ie) || ie.Field != "line 2" {
		t.Errorf("invalid UTF-8 in a text = %v, want an input error on line 2", err)
	}
	if d := digest(t, dstStore.Pool()); d != "" {
		t.Error("a refused import stored something")
	}
	// Within the limits, everything is stored (and a second import stores nothing more).
	edge := edited(t, good[1], map[string]any{"group.note": long(redrive.MaxNoteLen), "topic": long(redrive.MaxKeyText)})
	in := good[0] + "\n" + edge + "\n" + good[2] + "\n"
	for i, want := range []int64{3, 0} {
		res, err := dst.Import(context.Background(), strings.NewReader(in), false, "ada")
		if err != nil || res.Inserted != want {
			t.Fatalf("import %d at the limits = %+v, %v, want %d stored", i+1, res, err, want)
		}
	}
}

// An export made by a reader who sees masked payloads is refused as a whole by line, so that
// asterisks are never stored as originals.
func TestImportRefusesMaskedExport(t *testing.T) {
	t.Parallel()
	rules, err := masking.Parse(strings.NewReader("* header a"), "test")
	if err != nil {
		t.Fatal(err)
	}
	src, srcStore := newCore(t, func(cfg *operator.Config) { cfg.Masking = rules })
	seedTransfer(t, srcStore.Pool(), 0)
	lines := exportLines(t, src, admin) // the first failure has headers "a": masked
	at := -1
	for i, l := range lines {
		if strings.Contains(l, `"masked":true`) {
			at = i + 1
			break
		}
	}
	if at < 0 {
		t.Fatal("no masked line in the export")
	}
	dst, dstStore := newCore(t, nil)
	_, err = dst.Import(context.Background(), strings.NewReader(strings.Join(lines, "\n")+"\n"), false, "ada")
	var ie *operator.InputError
	if !errors.As(err, &ie) || ie.Field != fmt.Sprintf("line %d", at) || !strings.Contains(ie.Detail, "masked") {
		t.Fatalf("import of a masked export = %v, want line %d refused as masked", err, at)
	}
	if d := digest(t, dstStore.Pool()); d != "" {
		t.Error("a refused import stored something")
	}
}
