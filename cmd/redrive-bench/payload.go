package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/avro/confluentsr"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/store"
)

func init() { commands["payload"] = benchPayload }

// The Protobuf schema of the payload benchmark: an import registered as a reference, the
// well-known Timestamp and a nested message, as in the payload package's tests.
const (
	benchMoneyProto = `syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; }
`
	benchOrderProto = `syntax = "proto3";
package shop;
import "common/money.proto";
import "google/protobuf/timestamp.proto";
message Order {
  message Customer { string name = 1; string email = 2; }
  string id = 1;
  Customer customer = 2;
  shop.common.Money total = 3;
  google.protobuf.Timestamp placed_at = 4;
  repeated Line lines = 5;
  int32 quantity = 6;
}
message Line { string sku = 1; int32 quantity = 2; }
`
	benchProtoTopic = "orders-proto"
)

// benchPayload seeds a database as the api benchmark does (or reuses one), adds Protobuf
// failures whose writer schema a registry serves, and measures the payload view of one such
// failure over loopback HTTP (GET /failures/{id}/payload?format=decoded: the lookup by id, the
// schema from the registry client's cache, the decoding, the masking and the audit entry of the
// read), next to the raw payload and the detail of the same failures.
func benchPayload(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("payload", flag.ContinueOnError)
	var (
		n        = fs.Int("n", 1000000, "failures to seed (JSON values, as the api benchmark's)")
		protos   = fs.Int("protobuf", 1000, "Protobuf failures added")
		requests = fs.Int("requests", 1000, "measured requests per scenario")
		dbURL    = scratchServerFlag(fs)
		reuse    = fs.String("reuse", "", "URL of a database seeded by an earlier run with -keep (of this or the api benchmark); skips the seeding")
		keep     = fs.Bool("keep", false, "keep the seeded database and print its URL, for -reuse")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 0 || *protos <= 0 || *requests <= 0 {
		return errors.New("-protobuf and -requests must be positive, -n not negative")
	}
	var pool *pgxpool.Pool
	if *reuse != "" {
		p, err := pgxpool.New(ctx, *reuse)
		if err != nil {
			return err
		}
		defer p.Close()
		pool = p
	} else {
		p, drop, err := scratchDatabaseAt(ctx, *dbURL, layoutVersion)
		if err != nil {
			return err
		}
		if *keep {
			defer p.Close()
			fmt.Printf("keeping the database: -reuse '%s'\n", p.Config().ConnString())
		} else {
			defer drop()
		}
		pool = p
		start := time.Now()
		if *n > 0 {
			if err := seedAPIBench(ctx, pool, *n); err != nil {
				return err
			}
		}
		if err := migrateAll(ctx, pool); err != nil {
			return err
		}
		fmt.Printf("seeded %d failures in %s\n", *n, time.Since(start).Round(time.Second))
	}

	// The registry (confluent-kafka-go's in-memory mock, so that the figure is redrive's, not a
	// network's) and the Protobuf values framed with the schema id and message indexes.
	reg, err := confluentsr.Dial("mock://redrive-bench-payload", "", "")
	if err != nil {
		return err
	}
	values, err := benchProtoValues(reg.Client(), *protos)
	if err != nil {
		return err
	}
	ids, err := insertProtoFailures(ctx, pool, values)
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}
	var rows int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM failures").Scan(&rows); err != nil {
		return err
	}

	st, err := store.New(store.Config{Pool: pool})
	if err != nil {
		return err
	}
	const token = "bench-token-0123456789abcdef"
	tokens, err := auth.ParseTokens("bench:viewer+payload:" + token)
	if err != nil {
		return err
	}
	authn, err := auth.NewAuthenticator(auth.Config{Tokens: tokens})
	if err != nil {
		return err
	}
	decoder, err := payload.New(payload.Config{Registry: reg})
	if err != nil {
		return err
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := operator.New(operator.Config{Store: st, Payloads: decoder, Logger: discard})
	if err != nil {
		return err
	}
	h, err := api.New(api.Config{Core: core, Auth: authn, Logger: discard})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := &apiBenchClient{base: srv.URL + api.Prefix, token: token, http: srv.Client()}
	fmt.Printf("payload benchmark: %d failures (%d of them Protobuf, %d bytes each on average), %d measured requests per scenario, one client over loopback HTTP\n",
		rows, len(ids), avgLen(values), *requests)

	// Decoding alone, in process.
	start := time.Now()
	for i := range *requests {
		if _, err := decoder.Decode(benchProtoTopic, "value", values[i%len(values)]); err != nil {
			return err
		}
	}
	fmt.Printf("decode alone (payload.Decoder, schema cached): %s per value\n", (time.Since(start) / time.Duration(*requests)).Round(time.Microsecond))

	scenarios := []struct {
		name string
		path func(i int) string
	}{
		{"payload view, Protobuf (format=decoded)", func(i int) string {
			return "/failures/" + ids[i%len(ids)].String() + "/payload?format=decoded"
		}},
		{"payload raw, same failures (format=raw)", func(i int) string { return "/failures/" + ids[i%len(ids)].String() + "/payload" }},
		{"detail, same failures", func(i int) string { return "/failures/" + ids[i%len(ids)].String() }},
	}
	fmt.Printf("\n| request | p50 | p99 | max |\n|---|---|---|---|\n")
	for _, sc := range scenarios {
		lat, err := c.measure(ctx, *requests, sc.path)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Printf("| %s | %s | %s | %s |\n", sc.name, apiPct(lat, 50), apiPct(lat, 99), apiPct(lat, 100))
	}
	return nil
}

func avgLen(vs [][]byte) int {
	n := 0
	for _, v := range vs {
		n += len(v)
	}
	return n / max(len(vs), 1)
}

// benchProtoValues registers the benchmark's schemas and returns n Protobuf orders in the
// Confluent wire format.
func benchProtoValues(client schemaregistry.Client, n int) ([][]byte, error) {
	srcs := map[string]string{"order.proto": benchOrderProto, "common/money.proto": benchMoneyProto}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(srcs)})}
	files, err := c.Compile(context.Background(), "order.proto")
	if err != nil {
		return nil, err
	}
	if _, err := client.Register("common/money.proto", schemaregistry.SchemaInfo{Schema: benchMoneyProto, SchemaType: "PROTOBUF"}, false); err != nil {
		return nil, err
	}
	id, err := client.Register(benchProtoTopic+"-value", schemaregistry.SchemaInfo{Schema: benchOrderProto, SchemaType: "PROTOBUF",
		References: []schemaregistry.Reference{{Name: "common/money.proto", Subject: "common/money.proto", Version: 1}}}, false)
	if err != nil {
		return nil, err
	}
	md := files[0].Messages().ByName("Order")
	rnd := rand.New(rand.NewPCG(3, 4))
	out := make([][]byte, n)
	for i := range out {
		var lines []string
		for j := range 1 + rnd.IntN(5) {
			lines = append(lines, fmt.Sprintf(`{"sku":"SKU-%06d","quantity":%d}`, rnd.IntN(1e6), 1+j))
		}
		js := fmt.Sprintf(`{"id":"o-%d","customer":{"name":"Customer %d","email":"c%d@example.com"},"total":{"currency":"CHF","units":"%d"},`+
			`"placedAt":"2026-03-01T12:%02d:00.250Z","lines":[%s],"quantity":%d}`, i, i, i, rnd.IntN(1e5), i%60, strings.Join(lines, ","), len(lines))
		m := dynamicpb.NewMessage(md)
		if err := protojson.Unmarshal([]byte(js), m); err != nil {
			return nil, err
		}
		b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
		b = append(b, 0) // message indexes [0]
		opts := proto.MarshalOptions{Deterministic: true}
		if out[i], err = opts.MarshalAppend(b, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// insertProtoFailures stores one failure per value (through the failures view) and returns
// their ids.
func insertProtoFailures(ctx context.Context, pool *pgxpool.Pool, values [][]byte) ([]uuid.UUID, error) {
	var groupID int64
	if err := pool.QueryRow(ctx, `INSERT INTO failure_groups (publisher_service, message_type, error_code, stack_trace_hash)
		VALUES ('proto-service', 'shop.Order', 'DESERIALIZATION_FAILED', 'feedbeef') RETURNING id`).Scan(&groupID); err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	ids := make([]uuid.UUID, len(values))
	rows := make([][]any, len(values))
	now := time.Now().UTC()
	for i, v := range values {
		ids[i] = uuid.New()
		rows[i] = []any{ids[i], "PERMANENT", "PERMANENT", "DESERIALIZATION_FAILED", "failed to process order", "at shop.Orders.handle",
			"feedbeef", ids[i].String(), ids[i].String(), now, "shop", "proto-service", benchProtoTopic, int32(i % 6), int64(i),
			[]byte(ids[i].String()), v, []string{"content-type"}, [][]byte{[]byte("application/x-protobuf")}, "shop.Order",
			"proto-" + ids[i].String(), 1, nil, nil, nil, nil, nil, groupID, now, now}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"failures"}, apiBenchColumns, pgx.CopyFromRows(rows)); err != nil {
		return nil, fmt.Errorf("insert Protobuf failures: %w", err)
	}
	return ids, nil
}
