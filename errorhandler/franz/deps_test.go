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
