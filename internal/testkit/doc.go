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
// Building a template drops the templates of other migration sets
// (redrive_tmpl_*). A test binary killed before its cleanups ran leaves
// its redrive_test_* databases behind; drop them when no test runs.
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
// What a record carries is a contract in redrive (a resend reproduces the
// original bytes), so kafka_test.go pins what confluent-kafka-go v2.11.1
// (librdkafka 2.11) does, checked both on the bytes kfake receives and on
// what a consumer reads back:
//
//   - Keys, values and header values all keep nil apart from empty: nil
//     is sent as length -1 (null) and read back as nil; an empty non-nil
//     slice is sent as length 0 and read back as a non-nil empty slice. A
//     nil value is a tombstone. Code that copies records must therefore
//     keep nil as nil (a []byte(nil) must not become []byte{} or back).
//   - Header order and duplicate header names are kept; a record with no
//     headers reads back with Headers == nil.
//   - Header names are C strings: a name is cut at its first NUL byte
//     ("a\x00b" arrives as "a"). Other bytes, including invalid UTF-8,
//     pass through.
//   - Delivery reports carry key and value but not headers unless the
//     producer sets go.delivery.report.fields=all (the shared producer of
//     [Cluster.Produce] does).
package testkit
