package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helpFlag is one flag as `redrive <command> -h` prints it.
type helpFlag struct {
	name  string
	usage string
	env   string // the variable named by "(env VAR)"; "" when the flag has none
	def   string // the printed default, unquoted; "" for a zero value (not printed)
}

var (
	helpEnvRE     = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)\)`)
	helpDefaultRE = regexp.MustCompile(`\(default (.+)\)$`)
)

// parseHelp reads the flags out of flag.PrintDefaults output.
func parseHelp(t *testing.T, text string) []helpFlag {
	t.Helper()
	var flags []helpFlag
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name := strings.TrimPrefix(line, "  -")
			name, usage, _ := strings.Cut(name, "\t") // one-letter flags: usage on the same line
			name, _, _ = strings.Cut(name, " ")       // "-name type"
			flags = append(flags, helpFlag{name: name, usage: strings.TrimSpace(usage)})
		case strings.HasPrefix(line, "    \t") && len(flags) > 0:
			f := &flags[len(flags)-1]
			f.usage = strings.TrimSpace(f.usage + " " + strings.TrimPrefix(line, "    \t"))
		}
	}
	for i := range flags {
		f := &flags[i]
		if m := helpEnvRE.FindStringSubmatch(f.usage); m != nil {
			f.env = m[1]
		}
		if m := helpDefaultRE.FindStringSubmatch(f.usage); m != nil {
			f.def = m[1]
			if strings.HasPrefix(f.def, `"`) {
				d, err := strconv.Unquote(f.def)
				if err != nil {
					t.Fatalf("flag -%s: default %s does not unquote: %v", f.name, f.def, err)
				}
				f.def = d
			}
		}
	}
	return flags
}

// commandFlags returns the flags of `redrive <words...>` from its -h output, with every
// variable the flags read unset, so that the printed defaults are the built-in ones.
func commandFlags(t *testing.T, words []string) []helpFlag {
	t.Helper()
	cmd, ok := commands()[words[0]]
	if !ok {
		t.Fatalf("docs/configuration.md documents `redrive %s`, which is not a command", strings.Join(words, " "))
	}
	// Unset the variables of the commands first: one that does not parse would fail -h.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "REDRIVE_") || k == "DATABASE_URL" {
			t.Setenv(k, "")
		}
	}
	help := func() []helpFlag {
		var stderr bytes.Buffer
		args := append(slices.Clone(words[1:]), "-h")
		if err := cmd.run(context.Background(), args, stdio{in: strings.NewReader(""), out: io.Discard, err: &stderr}); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("redrive %s -h: got %v, want flag.ErrHelp; output:\n%s", strings.Join(words, " "), err, stderr.String())
		}
		return parseHelp(t, stderr.String())
	}
	flags := help()
	unset := false
	for _, f := range flags {
		if f.env != "" && os.Getenv(f.env) != "" {
			t.Setenv(f.env, "")
			unset = true
		}
	}
	if unset {
		flags = help()
	}
	return flags
}

// docRow is one row of a flag table in docs/configuration.md.
type docRow struct {
	line                   int
	flag, env, def, detail string
}

var (
	docSectionRE  = regexp.MustCompile("^## `redrive ([a-z ]+)`\\s*$")
	docFlagCellRE = regexp.MustCompile("^`-([a-z0-9][a-z0-9-]*)`$")
	docCodeRE     = regexp.MustCompile("`([^`]*)`")
)

// parseConfigDoc returns the flag rows of docs/configuration.md by section ("serve",
// "event decode", …; rows outside a `redrive …` section are not returned), and the sections in
// order.
func parseConfigDoc(t *testing.T, text string) (map[string][]docRow, []string) {
	t.Helper()
	rows := map[string][]docRow{}
	var order []string
	section := ""
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "## ") {
			section = ""
			if m := docSectionRE.FindStringSubmatch(line); m != nil {
				section = m[1]
				order = append(order, section)
				rows[section] = nil
			}
			continue
		}
		if section == "" || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if cells[0] == "flag" || strings.HasPrefix(cells[0], "---") {
			continue // header and separator
		}
		m := docFlagCellRE.FindStringSubmatch(cells[0])
		if m == nil || len(cells) < 4 {
			t.Errorf("docs/configuration.md:%d: want a row `| `-flag` | variable | default | meaning |`, got %q", i+1, line)
			continue
		}
		rows[section] = append(rows[section], docRow{
			line: i + 1, flag: m[1], env: cells[1], def: cells[2], detail: strings.Join(cells[3:], "|"),
		})
	}
	return rows, order
}

// sameDefault reports whether a default written in the documentation is the flag's default:
// the same text, or the same duration or number written another way (720h and 720h0m0s).
func sameDefault(doc, code string) bool {
	if doc == code {
		return true
	}
	if a, err := time.ParseDuration(doc); err == nil {
		b, err := time.ParseDuration(code)
		return err == nil && a == b
	}
	if a, err := strconv.ParseFloat(doc, 64); err == nil {
		b, err := strconv.ParseFloat(code, 64)
		return err == nil && a == b
	}
	return false
}

// TestConfigDocs checks docs/configuration.md against the flags the commands define: every
// flag of every command is documented once, with its environment variable and its default, and
// the document names no flag, variable or command that does not exist.
func TestConfigDocs(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, sections := parseConfigDoc(t, string(text))

	// Every command has a section; a command with actions, such as event, one per action.
	for name := range commands() {
		if !slices.ContainsFunc(sections, func(s string) bool { return s == name || strings.HasPrefix(s, name+" ") }) {
			t.Errorf("docs/configuration.md has no section \"## `redrive %s`\"", name)
		}
	}
	for _, required := range []string{"event decode", "event encode"} {
		if !slices.Contains(sections, required) {
			t.Errorf("docs/configuration.md has no section \"## `redrive %s`\"", required)
		}
	}

	for _, section := range sections {
		t.Run(strings.ReplaceAll(section, " ", "_"), func(t *testing.T) {
			flags := commandFlags(t, strings.Fields(section))
			documented := map[string]docRow{}
			for _, r := range rows[section] {
				if prev, dup := documented[r.flag]; dup {
					t.Errorf("line %d: -%s is documented again (first on line %d)", r.line, r.flag, prev.line)
				}
				documented[r.flag] = r
				if !slices.ContainsFunc(flags, func(f helpFlag) bool { return f.name == r.flag }) {
					t.Errorf("line %d: `redrive %s` has no flag -%s", r.line, section, r.flag)
				}
				if strings.TrimSpace(r.detail) == "" {
					t.Errorf("line %d: -%s has no meaning", r.line, r.flag)
				}
			}
			for _, f := range flags {
				r, ok := documented[f.name]
				if !ok {
					t.Errorf("-%s (%s) is not documented in the section of `redrive %s`", f.name, f.usage, section)
					continue
				}
				if f.env != "" && r.env != "`"+f.env+"`" {
					t.Errorf("line %d: -%s reads %s, the document says %q", r.line, f.name, f.env, r.env)
				}
				if f.env == "" && r.env != "–" {
					t.Errorf("line %d: -%s reads no environment variable, the document says %q (want –)", r.line, f.name, r.env)
				}
				docDef := ""
				if m := docCodeRE.FindStringSubmatch(r.def); m != nil {
					docDef = m[1]
				}
				switch {
				case f.def != "" && !sameDefault(docDef, f.def):
					t.Errorf("line %d: -%s defaults to %q, the document says %q", r.line, f.name, f.def, r.def)
				case f.def == "" && docDef != "" && !slices.Contains([]string{"false", "0", "0s"}, docDef):
					t.Errorf("line %d: -%s has no default, the document says %q", r.line, f.name, r.def)
				}
			}
		})
	}
}

// composeServiceVars returns the REDRIVE_* variables set in each service of a compose file.
func composeServiceVars(text string) map[string][]string {
	serviceRE := regexp.MustCompile(`^  ([a-z0-9][a-z0-9_.-]*):\s*$`)
	varRE := regexp.MustCompile(`^\s+(REDRIVE_[A-Z0-9_]+):`)
	vars := map[string][]string{}
	inServices, service := false, ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "services:"):
			inServices = true
		case line != "" && line[0] != ' ' && line[0] != '#':
			inServices, service = false, ""
		case inServices && serviceRE.MatchString(line):
			service = serviceRE.FindStringSubmatch(line)[1]
		case service != "":
			if m := varRE.FindStringSubmatch(line); m != nil {
				vars[service] = append(vars[service], m[1])
			}
		}
	}
	return vars
}

// TestConfigDocsCompose checks that docker-compose.yml sets every variable of `redrive serve`
// on the redrive service, and no REDRIVE_* variable that the commands do not read.
func TestConfigDocsCompose(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	vars := composeServiceVars(string(text))
	known := map[string]bool{}
	var serveVars []string
	for _, words := range [][]string{{"serve"}, {"migrate"}} {
		for _, f := range commandFlags(t, words) {
			if f.env != "" {
				known[f.env] = true
				if words[0] == "serve" {
					serveVars = append(serveVars, f.env)
				}
			}
		}
	}
	if len(serveVars) == 0 {
		t.Fatal("redrive serve -h names no environment variable")
	}
	for _, v := range serveVars {
		if !slices.Contains(vars["redrive"], v) {
			t.Errorf("docker-compose.yml: service redrive does not set %s", v)
		}
	}
	for service, names := range vars {
		for _, v := range names {
			if !known[v] {
				t.Errorf("docker-compose.yml: service %s sets %s, which no command reads", service, v)
			}
		}
	}
}
