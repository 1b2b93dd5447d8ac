package web

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The UI is a translator over the operator core: it does not reach into the REST API's
// package, and it decodes no Avro itself (the core's payload decoder does), so neither it nor
// its tests import goavro.
func TestImports(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	list := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	for _, dep := range list("-deps", "-test", ".") {
		if dep == "github.com/redrive/redrive/api" {
			t.Errorf("web depends on %s", dep)
		}
	}
	for _, imp := range list("-f", `{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, ".") {
		if strings.Contains(imp, "goavro") || imp == "github.com/redrive/redrive/api" {
			t.Errorf("web imports %s", imp)
		}
	}
}
