package confluentsr_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/confluentsr"
)

// The three calls redrive makes, against confluent-kafka-go's in-memory registry.
func TestRegistryCalls(t *testing.T) {
	reg, err := confluentsr.Dial("mock://confluentsr-test", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	subject := avro.Subject("errors", avro.EventFullName)
	id, err := reg.Register(ctx, subject, avro.EventSchema())
	if err != nil {
		t.Fatal(err)
	}
	if again, err := reg.Register(ctx, subject, avro.EventSchema()); err != nil || again != id {
		t.Errorf("registering again = %d, %v; want the same id %d", again, err, id)
	}
	s, err := reg.SchemaByID(ctx, subject, id)
	if err != nil || s.Schema == "" || (s.Type != "" && s.Type != "AVRO") {
		t.Errorf("SchemaByID = %+v, %v", s, err)
	}
	subjects, err := reg.SubjectsByID(ctx, id)
	if err != nil || len(subjects) != 1 || subjects[0] != subject {
		t.Errorf("SubjectsByID = %v, %v", subjects, err)
	}
	if _, err := reg.SchemaByID(ctx, subject, id+100); err == nil {
		t.Error("an unknown id was found")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := reg.Register(cancelled, subject, avro.EventSchema()); err == nil {
		t.Error("a cancelled context was not honoured")
	}
}
