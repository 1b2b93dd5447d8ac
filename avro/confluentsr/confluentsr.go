// Package confluentsr adapts confluent-kafka-go's schema registry client to [avro.Registry].
//
// It is the one package of redrive that links confluent-kafka-go's schemaregistry module for
// the codec; the service (cmd/redrive) uses it. A consumer built on franz-go uses
// avro/franzsr instead and so pulls in no module of confluent-kafka-go.
package confluentsr

import (
	"context"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/redrive/redrive/avro"
)

// Registry is an [avro.Registry] over a confluent-kafka-go schema registry client. The client's
// calls take no context, so the contexts passed in are not honoured beyond a check before
// each call; the client's own timeouts bound a call.
type Registry struct {
	client schemaregistry.Client
}

var _ avro.ReferenceRegistry = (*Registry)(nil)

// New returns a Registry over client, which must not be nil.
func New(client schemaregistry.Client) *Registry {
	return &Registry{client: client}
}

// Dial returns a Registry for the registry at url ("mock://name" gives confluent-kafka-go's
// in-memory mock), with basic authentication when user is not empty.
func Dial(url, user, password string) (*Registry, error) {
	conf := schemaregistry.NewConfig(url)
	if user != "" {
		conf = schemaregistry.NewConfigWithBasicAuthentication(url, user, password)
	}
	c, err := schemaregistry.NewClient(conf)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return New(c), nil
}

// Client returns the underlying client.
func (r *Registry) Client() schemaregistry.Client { return r.client }

// Register implements [avro.Registry].
func (r *Registry) Register(ctx context.Context, subject, schema string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	id, err := r.client.Register(subject, schemaregistry.SchemaInfo{Schema: schema, SchemaType: "AVRO"}, false)
	if err != nil {
		return 0, fmt.Errorf("register: %w", err)
	}
	return id, nil
}

// SchemaByID implements [avro.Registry].
func (r *Registry) SchemaByID(ctx context.Context, subject string, id int) (avro.RegistrySchema, error) {
	if err := ctx.Err(); err != nil {
		return avro.RegistrySchema{}, err
	}
	info, err := r.client.GetBySubjectAndID(subject, id)
	if err != nil {
		return avro.RegistrySchema{}, fmt.Errorf("schema by id: %w", err)
	}
	return fromInfo(info), nil
}

// SchemaByVersion implements [avro.ReferenceRegistry].
func (r *Registry) SchemaByVersion(ctx context.Context, subject string, version int) (avro.RegistrySchema, error) {
	if err := ctx.Err(); err != nil {
		return avro.RegistrySchema{}, err
	}
	md, err := r.client.GetSchemaMetadata(subject, version)
	if err != nil {
		return avro.RegistrySchema{}, fmt.Errorf("schema by version: %w", err)
	}
	return fromInfo(md.SchemaInfo), nil
}

// fromInfo converts the client's schema.
func fromInfo(info schemaregistry.SchemaInfo) avro.RegistrySchema {
	out := avro.RegistrySchema{Schema: info.Schema, Type: info.SchemaType}
	for _, ref := range info.References {
		out.References = append(out.References, avro.RegistryReference{Name: ref.Name, Subject: ref.Subject, Version: ref.Version})
	}
	return out
}

// SubjectsByID implements [avro.Registry].
func (r *Registry) SubjectsByID(ctx context.Context, id int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	svs, err := r.client.GetSubjectsAndVersionsByID(id)
	if err != nil {
		return nil, fmt.Errorf("subjects by id: %w", err)
	}
	out := make([]string, 0, len(svs))
	for _, sv := range svs {
		out = append(out, sv.Subject)
	}
	return out, nil
}
