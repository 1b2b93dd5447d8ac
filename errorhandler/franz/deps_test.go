package franz

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// franzBuild are the packages a franz-go user links: the middleware, its franz adapter, the
// codec with franz-go's schema registry adapter, and the example consumer as built without cgo.
var franzBuild = []string{
	"github.com/redrive/redrive/errorhandler",
	"github.com/redrive/redrive/errorhandler/franz",
	"github.com/redrive/redrive/avro",
	"github.com/redrive/redrive/avro/franzsr",
	"github.com/redrive/redrive/examples/orders-consumer",
}

// listedPackage is the part of `go list -json` output the dependency check reads.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// TestFranzBuildIsPureGo proves the dependency rule of the franz-go build: no package it
// links belongs to a module of confluent-kafka-go (neither the cgo client nor its schema
// registry client), none needs cgo, and the packages build with CGO_ENABLED=0. A violation
// names the chain of imports that pulls the module in, like `go mod why`.
func TestFranzBuildIsPureGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	env := append(os.Environ(), "CGO_ENABLED=0")
	list := exec.Command(goTool, append([]string{"list", "-deps", "-json=ImportPath,Imports,Module"}, franzBuild...)...)
	list.Env = env
	out, err := list.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	pkgs := map[string]*listedPackage{}
	modules := map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = &p
		if p.Module != nil {
			modules[p.Module.Path] = true
		}
	}
	if len(pkgs) < len(franzBuild) || !modules["github.com/twmb/franz-go"] {
		t.Fatalf("go list listed %d packages and modules %v: not the franz build", len(pkgs), modules)
	}
	for path, p := range pkgs {
		bad := path == "C" || strings.Contains(path, "librdkafka")
		module := "standard library"
		if p.Module != nil {
			module = p.Module.Path
			bad = bad || strings.HasPrefix(module, "github.com/confluentinc/")
		}
		if bad {
			t.Errorf("the franz-go build links %s (module %s): %s", path, module, strings.Join(importChain(pkgs, path), " -> "))
		}
	}
	var mods []string
	for m := range modules {
		mods = append(mods, m)
	}
	slices.Sort(mods)
	t.Logf("modules of the franz-go build: %s", strings.Join(mods, ", "))

	build := exec.Command(goTool, append([]string{"build", "-o", t.TempDir()}, franzBuild...)...)
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}

// importChain returns the shortest chain of imports from a package of franzBuild to target.
func importChain(pkgs map[string]*listedPackage, target string) []string {
	prev := map[string]string{}
	queue := slices.Clone(franzBuild)
	for _, r := range franzBuild {
		prev[r] = ""
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == target {
			var chain []string
			for p := cur; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		if p := pkgs[cur]; p != nil {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return []string{target}
}

// TestFranzUserNeedsNoConfluentModule is `go mod why -m` in the module of a franz-go user: a
// throwaway module that requires this one (replaced by the working tree, with its go.sum) and
// imports the middleware, the franz adapter and the franz-go registry adapter. Go must answer
// that the module does not need confluent-kafka-go, counting the tests of every package it
// reaches, as `go mod why` does.
func TestFranzUserNeedsNoConfluentModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := "go 1.26.0"
	for _, l := range strings.Split(string(mod), "\n") {
		if strings.HasPrefix(l, "go ") {
			goLine = l
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/franzuser\n\n" + goLine + "\n\nrequire github.com/redrive/redrive v0.0.0\n\nreplace github.com/redrive/redrive => " + root + "\n",
		"go.sum": string(sum),
		"main.go": `package main

import (
	"github.com/redrive/redrive/avro/franzsr"
	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/franz"
)

func main() {
	reg, _ := franzsr.Dial([]string{"http://localhost:8081"})
	_, _ = franz.New(errorhandler.Config[[]byte, []byte]{DeadLetter: errorhandler.DeadLetterConfig{Registry: reg}}, franz.Settings{})
}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const confluentModule = "github.com/confluentinc/confluent-kafka-go/v2"
	why := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "mod", "why", "-m", confluentModule)
	why.Dir = dir
	// The hashes come from this module's go.sum; a module only the analysis needs (a test
	// dependency of a dependency) is not built into anything.
	why.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOSUMDB=off")
	out, err := why.CombinedOutput()
	if err != nil {
		t.Fatalf("go mod why: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "(main module does not need module "+confluentModule+")") {
		t.Errorf("a franz-go user's module needs %s:\n%s", confluentModule, out)
	}
}
