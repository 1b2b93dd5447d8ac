// Package testkit gives tests the real dependencies redrive runs against:
// a fresh PostgreSQL database per test and an in-process Kafka cluster per
// test, both torn down by t.Cleanup.
//
// # PostgreSQL
//
// [Postgres] and [PostgresDB] return a new database with the project
// migrations applied; [EmptyPostgres] returns one without them, for
// migration tests. The server is the one named by TEST_DATABASE_URL, or
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable when it is
// unset; its user must be allowed to CREATE DATABASE. When no server
// answers, the test fails with a hint rather than being skipped.
//
// Migrations run once per migration set, not once per test: the first test
// binary that needs them builds a template database named after a hash of
// the files in migrations/ (under a PostgreSQL advisory lock, so parallel
// test packages do not race), and every test database is a copy of it.
// Templates are named redrive_tmpl_<hash>; stale ones can be dropped at any
// time no test runs.
//
// # Kafka
//
// [Kafka] starts a kfake cluster in the process; confluent-kafka-go
// clients reach it over TCP at [Cluster.Bootstrap]. The Cluster builds
// clients with test-friendly settings ([Cluster.Producer],
// [Cluster.Consumer]), produces and reads records
// ([Cluster.Produce], [Cluster.ConsumeN]) and injects faults
// ([Cluster.FailProduce], or any kfake fault through [Cluster.Fake]).
// librdkafka logs go to t.Log at warning level and above, so they show
// only when a test fails or runs with -v.
//
// # Nil and empty bytes in confluent-kafka-go
//
// What a record carries is a contract in redrive (the resend reproduces
// the original bytes), so kafka_test.go pins how confluent-kafka-go v2
// maps nil and empty slices, checked both against the bytes kfake
// receives and against what a consumer reads back:
//
//   - Key and Value: nil and empty are different on the wire (length -1
//     vs 0) and survive the round trip: a nil key reads back as nil, an
//     empty key as a non-nil empty slice. The same holds for values
//     (nil value = tombstone).
//   - Header values: a nil value is a null header (length -1) and reads
//     back as nil. An EMPTY header value ([]byte{}) is ALSO sent as a
//     null header, because the producer copies only non-empty values to C
//     and passes NULL otherwise: it reads back as nil, and the distinction
//     is lost. Code that must keep an empty header value distinct from a
//     null one cannot rely on confluent-kafka-go to do it.
//   - Header order and duplicate header names are kept.
package testkit
