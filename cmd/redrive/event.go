package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
)

func runEvent(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		fmt.Fprintln(std.err, "Usage: redrive event decode|encode [flags] [FILE]")
		return errUsage
	}
	switch args[0] {
	case "decode":
		return runEventDecode(ctx, args[1:], std)
	case "encode":
		return runEventEncode(ctx, args[1:], std)
	default:
		fmt.Fprintf(std.err, "redrive event: unknown action %q (want decode or encode)\n", args[0])
		return errUsage
	}
}

// readInput reads FILE, or std.in when there is none.
func readInput(fs interface {
	NArg() int
	Arg(int) string
}, std stdio, maxSize int) ([]byte, string, error) {
	switch fs.NArg() {
	case 0:
		b, err := io.ReadAll(io.LimitReader(std.in, int64(maxSize)+1))
		return b, "standard input", err
	case 1:
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, int64(maxSize)+1))
		return b, fs.Arg(0), err
	default:
		fmt.Fprintf(std.err, "redrive event: want at most one FILE, got %d arguments\n", fs.NArg())
		return nil, "", errUsage
	}
}

func runEventDecode(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("event decode", "[--registry URL --topic TOPIC] [--key] [FILE]", std.err)
	registry := fs.String("registry", envOr("REDRIVE_SCHEMA_REGISTRY_URL", ""), "schema registry URL for Confluent-framed input; without it the built-in schema decodes the datum (env REDRIVE_SCHEMA_REGISTRY_URL)")
	topic := fs.String("topic", "", "topic the bytes were read from: names the registry subject <topic>-<record name>")
	key := fs.Bool("key", false, "decode a MessageProcessingFailedMessageKey instead of an event")
	maxSize := fs.Int("max-size", avro.DefaultMaxSize, "largest input accepted, in bytes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	codec, err := newCLICodec(*registry, *maxSize)
	if err != nil {
		return err
	}
	in, name, err := readInput(fs, std, *maxSize)
	if err != nil {
		return err
	}
	if *key {
		k, err := codec.DecodeKey(*topic, in)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		_, err = fmt.Fprintf(std.out, "{\n \"key\": %q\n}\n", k.Key)
		return err
	}
	e, err := codec.DecodeEvent(*topic, in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	js, err := avro.EventJSON(e)
	if err != nil {
		return err
	}
	_, err = std.out.Write(js)
	return err
}

func runEventEncode(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("event encode", "[--framing single|confluent] [--schema-id N] [FILE]", std.err)
	framing := fs.String("framing", "single", "single (Avro single-object encoding) or confluent (0x00 + schema id)")
	schemaID := fs.Int("schema-id", -1, "schema id for --framing confluent")
	maxSize := fs.Int("max-size", avro.DefaultMaxSize, "largest input accepted, in bytes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id := -1
	switch *framing {
	case "single":
		if *schemaID >= 0 {
			fmt.Fprintln(std.err, "redrive event encode: --schema-id goes with --framing confluent")
			return errUsage
		}
	case "confluent":
		if *schemaID < 0 || int64(*schemaID) > 1<<31-1 {
			fmt.Fprintln(std.err, "redrive event encode: --framing confluent needs --schema-id N (0 to 2147483647)")
			return errUsage
		}
		id = *schemaID
	default:
		fmt.Fprintf(std.err, "redrive event encode: --framing is %q, want single or confluent\n", *framing)
		return errUsage
	}
	in, name, err := readInput(fs, std, *maxSize)
	if err != nil {
		return err
	}
	if len(in) > *maxSize {
		return fmt.Errorf("%s: over the size limit of %d bytes", name, *maxSize)
	}
	e, err := avro.ParseEventJSON(in)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	out, err := avro.EncodeEventWith(e, id)
	if err != nil {
		return err
	}
	_, err = std.out.Write(out)
	return err
}

func newCLICodec(registryURL string, maxSize int) (*avro.Codec, error) {
	cfg := avro.Config{MaxSize: maxSize}
	if registryURL != "" {
		reg, err := confluentsr.Dial(registryURL, "", "")
		if err != nil {
			return nil, fmt.Errorf("schema registry %s: %w", registryURL, err)
		}
		cfg.Registry = reg
	}
	return avro.NewCodec(cfg)
}
