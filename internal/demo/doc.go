// Package demo holds the moving parts of `redrive demo` that are not the service itself: a
// sample "orders" consumer built on errorhandler (confluent-kafka-go) with every policy set to
// dead-letter, and a generator that produces a steady mix of good and failing orders, so that
// the UI fills with failures of every kind within a minute; a "ledger" consumer on franz-go
// with the Fail policy, whose generator writes one poison record, so that the demo also shows
// a halted partition (containment) and its release by an operator; and a feeder of a Spring
// Kafka dead-letter topic and a Kafka Connect dead-letter queue, so that the foreign sources
// show in the same UI; and a feeder of a Spring dead-letter topic of Protobuf shipments in the
// Confluent wire format (schemas, with a reference and a nested message, in an in-process
// registry), so that the UI shows Protobuf payloads decoded.
package demo
