package avro

import "context"

// Registry is the part of a Confluent-compatible schema registry that redrive uses: register
// the contract's schemas when writing the Confluent wire format, and look up the writer schema
// of a schema id when reading it. The avro package holds no registry client of its own, so that
// a consumer linking the middleware pulls in none; adapters live in avro/confluentsr
// (confluent-kafka-go's client) and avro/franzsr (franz-go's dependency-free pkg/sr).
//
// Implementations must be safe for concurrent use. Errors are returned as the client gives
// them (wrapped with %w), so that callers can tell an unreachable registry from an unknown id.
type Registry interface {
	// Register registers the Avro schema (JSON) under subject, or finds it already registered
	// there, and returns its schema id.
	Register(ctx context.Context, subject, schema string) (int, error)
	// SchemaByID returns the schema registered under id. subject, when not empty, is the
	// subject the caller expects the id under: registries that scope ids by context, and
	// some test doubles, need one; others ignore it.
	SchemaByID(ctx context.Context, subject string, id int) (RegistrySchema, error)
	// SubjectsByID returns the subjects under which the schema with id is registered.
	SubjectsByID(ctx context.Context, id int) ([]string, error)
}

// RegistrySchema is a schema as a registry serves it.
type RegistrySchema struct {
	// Schema is the schema text (Avro: JSON).
	Schema string
	// Type is the registry's schema type, e.g. "AVRO", "PROTOBUF", "JSON"; empty means Avro.
	Type string
	// References are the other schemas this one refers to (Protobuf imports, JSON Schema
	// $refs), each registered under a subject and version of its own.
	References []RegistryReference
}

// RegistryReference is a schema's reference to another registered schema.
type RegistryReference struct {
	// Name is how the referring schema names it: a Protobuf import path, a JSON Schema URL.
	Name string
	// Subject and Version say where it is registered.
	Subject string
	Version int
}

// ReferenceRegistry is a Registry that also serves a schema by subject and version, which
// resolving a schema's References needs. The adapters of avro/confluentsr and avro/franzsr
// implement it.
type ReferenceRegistry interface {
	Registry
	// SchemaByVersion returns the schema registered under subject with version.
	SchemaByVersion(ctx context.Context, subject string, version int) (RegistrySchema, error)
}
