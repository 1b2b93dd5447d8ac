package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/store"
)

// runFailures serves `redrive failures export|import`: failures as NDJSON, straight from and
// into a database (as `redrive migrate` reaches it).
func runFailures(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 || (args[0] != "export" && args[0] != "import") {
		fmt.Fprintln(std.err, "usage: redrive failures export [-database-url URL] [-filter QUERY] [-o FILE]\n"+
			"       redrive failures import [-database-url URL] [-dry-run] [FILE]")
		return errUsage
	}
	sub := args[0]
	fs := newFlagSet("failures "+sub, "[flags]", std.err)
	dbURL := fs.String("database-url", envOr("REDRIVE_DATABASE_URL", ""), "Postgres connection string (env REDRIVE_DATABASE_URL)")
	principal := fs.String("principal", "redrive-cli", "the name written to the audit log")
	var filter, out *string
	var dryRun *bool
	if sub == "export" {
		filter = fs.String("filter", "", "the failures to export, as the API's query string (topic=orders&state=PERMANENT); empty exports all")
		out = fs.String("o", "", "write to this file instead of standard output")
	} else {
		dryRun = fs.Bool("dry-run", false, "say what would be stored, store nothing")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *dbURL == "" {
		fmt.Fprintf(std.err, "redrive failures %s: REDRIVE_DATABASE_URL (-database-url) is required\n", sub)
		return errUsage
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("REDRIVE_DATABASE_URL: %w", err)
	}
	defer pool.Close()
	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	core, err := operator.New(operator.Config{Store: st})
	if err != nil {
		return err
	}
	if sub == "export" {
		if fs.NArg() > 0 {
			fmt.Fprintf(std.err, "redrive failures export: unexpected arguments %q\n", fs.Args())
			return errUsage
		}
		return exportFailures(ctx, core, *filter, *out, *principal, std)
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(std.err, "redrive failures import: one file at most, got %q\n", fs.Args())
		return errUsage
	}
	in := std.in
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	res, err := core.Import(ctx, in, *dryRun, *principal)
	var ie *operator.InputError
	if errors.As(err, &ie) {
		return fmt.Errorf("nothing imported: %s", ie.Error())
	}
	if err != nil {
		return err
	}
	verb := "imported"
	if *dryRun {
		verb = "would import"
	}
	_, err = fmt.Fprintf(std.out, "read %d failures: %s %d, skipped %d already stored\n", res.Read, verb, res.Inserted, res.Skipped)
	return err
}

func exportFailures(ctx context.Context, core *operator.Core, filter, out, principal string, std stdio) error {
	q, err := url.ParseQuery(filter)
	if err != nil {
		return fmt.Errorf("-filter: %w", err)
	}
	f, err := operator.ParseFilter(q)
	if err != nil {
		return fmt.Errorf("-filter: %w", err)
	}
	if f.PayloadField != "" {
		// This command has no schema registry (nor the server's masking rules): a decoded field
		// search would match nothing of a registry-framed value, so it is refused, not emptied.
		return fmt.Errorf("-filter: %s: a decoded field search needs the schema registries and masking rules of redrive serve: export through the API (GET /api/v1/failures/export) or the UI", operator.ParamPayloadField)
	}
	var w io.Writer = std.out
	if out != "" {
		file, err := os.Create(out)
		if err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	// The command line reads the database directly: it sees payloads, as its user could.
	res, err := core.Export(ctx, f, operator.Reader{Principal: principal, Payload: true}, func(line []byte) error {
		_, err := bw.Write(line)
		return err
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(std.err, "exported %d failures\n", res.Records)
	return err
}
