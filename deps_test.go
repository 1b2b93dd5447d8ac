package redrive_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/redrive/redrive"

// goList runs go list with args in the module and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// ownPackages keeps the packages of this module.
func ownPackages(paths []string) []string {
	var own []string
	for _, p := range paths {
		if p == module || strings.HasPrefix(p, module+"/") {
			own = append(own, p)
		}
	}
	return own
}

// The domain leaf depends on no package of this module but avro (and what avro itself
// depends on).
func TestLeafDependsOnNothingOfTheModule(t *testing.T) {
	allowed := ownPackages(goList(t, "-deps", "-f", "{{.ImportPath}}", module+"/avro"))
	deps := ownPackages(goList(t, "-deps", "-f", "{{.ImportPath}}", module))
	for _, d := range deps {
		if d != module && !slices.Contains(allowed, d) {
			t.Errorf("the leaf depends on %s", d)
		}
	}
	// The leaf's own imports: avro at most.
	for _, imp := range ownPackages(goList(t, "-f", `{{join .Imports " "}}`, module)) {
		if imp != module+"/avro" {
			t.Errorf("the leaf imports %s", imp)
		}
	}
}

// api and web never import store, in their code or their tests: they speak the domain leaf
// and the operator core.
func TestTranslatorsDoNotImportStore(t *testing.T) {
	for _, pkg := range []string{module + "/api", module + "/web"} {
		imports := goList(t, "-f", `{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, pkg)
		if slices.Contains(imports, module+"/store") {
			t.Errorf("%s imports store", pkg)
		}
		if !slices.Contains(imports, module) {
			t.Errorf("%s does not import the domain leaf", pkg)
		}
	}
}

// store speaks the leaf, and no translator: it imports neither api nor web.
func TestStoreDoesNotImportTranslators(t *testing.T) {
	deps := goList(t, "-deps", "-f", "{{.ImportPath}}", module+"/store")
	for _, bad := range []string{module + "/api", module + "/web", module + "/operator"} {
		if slices.Contains(deps, bad) {
			t.Errorf("store depends on %s", bad)
		}
	}
	if !slices.Contains(deps, module) {
		t.Error("store does not depend on the domain leaf")
	}
}
