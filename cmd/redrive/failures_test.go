package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
)

// `redrive failures export` then `import` into another database: the same failures; a dry
// run stores nothing; importing twice stores once.
func TestFailuresExportImport(t *testing.T) {
	t.Parallel()
	src, dst := testkit.PostgresDB(t), testkit.PostgresDB(t)
	for range 2 {
		testkit.InsertFailure(t, src.Pool, testkit.FailureRow{Topic: "orders"})
	}
	testkit.InsertFailure(t, src.Pool, testkit.FailureRow{Topic: "other"})
	cli := func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, file, msg := cli("", "failures", "export", "-database-url", src.DSN, "-filter", "topic=orders")
	if code != 0 || strings.Count(file, "\n") != 2 || !strings.Contains(msg, "exported 2 failures") {
		t.Fatalf("export = %d %q %q", code, file, msg)
	}
	if code, out, _ := cli(file, "failures", "import", "-database-url", dst.DSN, "-dry-run"); code != 0 || !strings.Contains(out, "would import 2") {
		t.Errorf("dry run = %d %q", code, out)
	}
	if code, out, _ := cli(file, "failures", "import", "-database-url", dst.DSN); code != 0 || !strings.Contains(out, "imported 2, skipped 0") {
		t.Errorf("import = %d %q", code, out)
	}
	if code, out, _ := cli(file, "failures", "import", "-database-url", dst.DSN); code != 0 || !strings.Contains(out, "imported 0, skipped 2") {
		t.Errorf("import again = %d %q", code, out)
	}
	if code, _, msg := cli(file+"{bad\n", "failures", "import", "-database-url", dst.DSN); code != 1 || !strings.Contains(msg, "line 3") {
		t.Errorf("bad line = %d %q", code, msg)
	}
	// What the intake would refuse, and a masked export, are refused by line and field.
	lines := strings.SplitAfter(file, "\n")
	for _, c := range []struct{ old, new, want string }{
		{`"error_message":"`, `"error_message":"\u0000`, "line 2: error_message: contains a NUL character"},
		{`"topic":"`, `"topic":"` + strings.Repeat("t", 10000), "line 2: topic: "},
		{`"format":`, `"masked":true,"format":`, "line 2: the record was exported masked"},
	} {
		bad := lines[0] + strings.Replace(lines[1], c.old, c.new, 1)
		if code, _, msg := cli(bad, "failures", "import", "-database-url", dst.DSN); code != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("import of %s = %d %q, want %q", c.new[:min(len(c.new), 30)], code, msg, c.want)
		}
	}
	if code, _, _ := cli("", "failures", "list"); code != 2 {
		t.Errorf("unknown action = %d", code)
	}
	if code, _, msg := cli("", "failures", "export", "-database-url", src.DSN, "-filter", "state=GONE"); code != 1 || !strings.Contains(msg, "state") {
		t.Errorf("bad filter = %d %q", code, msg)
	}
	// No schema registry here: a decoded field search is refused, not answered empty.
	if code, _, msg := cli("", "failures", "export", "-database-url", src.DSN, "-filter", "topic=orders&payload_field=/customer/email"); code != 1 || !strings.Contains(msg, "payload_field") {
		t.Errorf("decoded field search = %d %q", code, msg)
	}
}
