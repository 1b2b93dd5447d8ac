// Package franzsr adapts franz-go's schema registry client (github.com/twmb/franz-go/pkg/sr,
// pure Go and free of dependencies) to [avro.Registry], for consumers that want the Confluent
// wire format without linking any module of confluent-kafka-go.
package franzsr

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/redrive/redrive/avro"
)

// Registry is an [avro.Registry] over a franz-go schema registry client.
type Registry struct {
	client *sr.Client
}

var _ avro.ReferenceRegistry = (*Registry)(nil)

// New returns a Registry over client, which must not be nil.
func New(client *sr.Client) *Registry {
	return &Registry{client: client}
}

// Dial returns a Registry for the registries at urls, with the client options opts (for example
// sr.BasicAuth).
func Dial(urls []string, opts ...sr.ClientOpt) (*Registry, error) {
	c, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(urls...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return New(c), nil
}

// Register implements [avro.Registry].
func (r *Registry) Register(ctx context.Context, subject, schema string) (int, error) {
	id, err := r.client.RegisterSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		return 0, fmt.Errorf("register: %w", err)
	}
	return id, nil
}

// SchemaByID implements [avro.Registry]. It looks the id up alone, ignoring subject: a
// registry's ids are global (within the client's schema context, if one is configured), and a
// subject filter would miss a schema that its writer registered under another subject.
func (r *Registry) SchemaByID(ctx context.Context, _ string, id int) (avro.RegistrySchema, error) {
	s, err := r.client.SchemaByID(ctx, id)
	if err != nil {
		return avro.RegistrySchema{}, fmt.Errorf("schema by id: %w", err)
	}
	return fromSchema(s), nil
}

// SchemaByVersion implements [avro.ReferenceRegistry].
func (r *Registry) SchemaByVersion(ctx context.Context, subject string, version int) (avro.RegistrySchema, error) {
	s, err := r.client.SchemaByVersion(ctx, subject, version)
	if err != nil {
		return avro.RegistrySchema{}, fmt.Errorf("schema by version: %w", err)
	}
	return fromSchema(s.Schema), nil
}

// fromSchema converts the client's schema.
func fromSchema(s sr.Schema) avro.RegistrySchema {
	out := avro.RegistrySchema{Schema: s.Schema, Type: s.Type.String()}
	for _, ref := range s.References {
		out.References = append(out.References, avro.RegistryReference{Name: ref.Name, Subject: ref.Subject, Version: ref.Version})
	}
	return out
}

// SubjectsByID implements [avro.Registry].
func (r *Registry) SubjectsByID(ctx context.Context, id int) ([]string, error) {
	subjects, err := r.client.SubjectsByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("subjects by id: %w", err)
	}
	return subjects, nil
}
