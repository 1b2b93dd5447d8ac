package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The usage lists every command of the table once, in order.
func TestUsageListsCommands(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	if code := run(context.Background(), nil, strings.NewReader(""), &bytes.Buffer{}, &errOut); code != 2 {
		t.Fatalf("no command: exit %d, want 2", code)
	}
	last := -1
	for _, name := range []string{"demo", "event", "failures", "migrate", "serve", "version"} {
		i := strings.Index(errOut.String(), "\n  "+name+" ")
		if i < 0 || i < last {
			t.Errorf("usage does not list %s in order:\n%s", name, errOut.String())
		}
		last = i
		if _, ok := commands()[name]; !ok {
			t.Errorf("no command %s in the table", name)
		}
	}
	if n := len(commands()); n != 6 {
		t.Errorf("%d commands, want the 6 listed", n)
	}
}

// Commands read the standard input they are given: runs at once each read their own (the race
// detector would see a shared variable).
func TestRunsReadTheirOwnStdin(t *testing.T) {
	t.Parallel()
	names := []string{"minimal-permanent", "temporary-with-metadata", "unknown-empty-values"}
	var wg sync.WaitGroup
	for _, name := range names {
		in, err := os.ReadFile(filepath.Join(vectors, name+".single.bin"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(vectors, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			wg.Go(func() {
				var out, errOut bytes.Buffer
				code := run(context.Background(), []string{"event", "decode"}, bytes.NewReader(in), &out, &errOut)
				if code != 0 || !jsonEqual(t, out.Bytes(), want) {
					t.Errorf("decode %s from stdin: exit %d, %s", name, code, errOut.String())
				}
			})
		}
	}
	wg.Wait()
}
