// Package conformance holds the conformance suite of the errorhandler middleware: every
// guarantee the package errorhandler documents is tested against each adapter
// (errorhandler/confluent and errorhandler/franz) over an in-process Kafka (kfake), with the
// same records and the same assertions. It also holds the benchmark that compares the adapters
// with plain poll loops. It has no code of its own.
package conformance
