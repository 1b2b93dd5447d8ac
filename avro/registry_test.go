package avro_test

import (
	"context"
	"errors"
	"sync"

	"github.com/redrive/redrive/avro"
)

// scopedRegistry is an in-memory avro.Registry that serves an id only under the subject it was
// registered under, like registries that scope ids by context (and confluent-kafka-go's mock):
// what the payload decoder's subject fallbacks are for. It keeps the avro package's tests free
// of any registry client.
type scopedRegistry struct {
	mu      sync.Mutex
	ids     map[string]int // subject + "\x00" + schema -> id
	schemas map[int]scopedSchema
}

type scopedSchema struct{ subject, schema string }

var errNotFound = errors.New("40403 schema not found")

func newScopedRegistry() *scopedRegistry {
	return &scopedRegistry{ids: map[string]int{}, schemas: map[int]scopedSchema{}}
}

func (r *scopedRegistry) Register(_ context.Context, subject, schema string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.ids[subject+"\x00"+schema]; ok {
		return id, nil
	}
	id := len(r.schemas) + 1
	r.ids[subject+"\x00"+schema] = id
	r.schemas[id] = scopedSchema{subject: subject, schema: schema}
	return id, nil
}

func (r *scopedRegistry) SchemaByID(_ context.Context, subject string, id int) (avro.RegistrySchema, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.schemas[id]
	if !ok || s.subject != subject {
		return avro.RegistrySchema{}, errNotFound
	}
	return avro.RegistrySchema{Schema: s.schema, Type: "AVRO"}, nil
}

func (r *scopedRegistry) SubjectsByID(_ context.Context, id int) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.schemas[id]
	if !ok {
		return nil, errNotFound
	}
	return []string{s.subject}, nil
}
