// Command redrive is redrive's one binary: the service (`serve`), its schema migrations
// (`migrate`), the embedded demo (`demo`), and tools for operators (`event`, `version`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// stdio are the standard streams of a command.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one subcommand: it parses its own flags from args.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, std stdio) error
}

// commands returns the subcommands by name: the one list of the binary's commands.
func commands() map[string]command {
	return map[string]command{
		"serve":    {summary: "run the service: error-topic intake, retry scheduler, REST API and UI", run: runServe},
		"migrate":  {summary: "apply the database migrations (idempotent; safe from several instances at once)", run: runMigrate},
		"demo":     {summary: "run everything in one process: in-process Kafka, ephemeral Postgres, the service, a failing sample consumer", run: runDemo},
		"event":    {summary: "decode or encode one MessageProcessingFailedEvent (JSON <-> framed Avro)", run: runEvent},
		"failures": {summary: "export failures as NDJSON, or import such a file (another redrive, a test environment)", run: runFailures},
		"version":  {summary: "print the version", run: runVersion},
	}
}

// errUsage marks a usage error: the message was printed, the exit code is 2.
var errUsage = errors.New("usage error")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the subcommand named by args[0] and returns the process exit code:
// 0 on success, 1 on failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "redrive: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:], stdio{in: stdin, out: stdout, err: stderr})
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "redrive %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: redrive <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	cmds := commands()
	for _, n := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'redrive <command> -h' for the flags of a command.")
}

// newFlagSet returns a flag set that reports errors instead of exiting, with a usage line.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("redrive "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: redrive %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs; a bad flag is a usage error (exit 2).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
