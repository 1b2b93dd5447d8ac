package franzsr_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/avro/franzsr"
)

// The codec writes the Confluent wire format through franz-go's registry client (over HTTP,
// against an in-memory registry) and reads it back; an unknown id is a schema-id error.
func TestCodecOverFranzRegistry(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := franzsr.Dial([]string{fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := avro.NewCodec(avro.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	msg := "boom"
	want := avro.NewFailureEvent(&avro.FailedRecord{
		EventID: "e-1", IdempotenceID: "i-1", Created: time.UnixMilli(1700000000123),
		System: "shop", Service: "orders", Topic: "orders", Partition: 1, Offset: 7,
		Temporality: avro.Permanent, Code: "INVALID", Key: []byte("k"), Value: []byte("v"),
		ErrorMessage: msg, Metadata: &avro.Metadata{},
	})
	b, err := codec.EncodeEvent("errors", want)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 {
		t.Fatalf("first byte 0x%02x, want the Confluent wire format", b[0])
	}
	subjects, err := reg.SubjectsByID(context.Background(), int(b[4]))
	if err != nil || len(subjects) != 1 || subjects[0] != avro.Subject("errors", avro.EventFullName) {
		t.Fatalf("subjects of the registered id = %v, %v", subjects, err)
	}
	head, err := codec.EventFraming("errors")
	if err != nil || !reflect.DeepEqual(head, b[:5]) {
		t.Fatalf("EventFraming = %x, %v; EncodeEvent wrote %x", head, err, b[:5])
	}
	reader, err := avro.NewCodec(avro.Config{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	got, err := reader.DecodeEvent("errors", b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := reader.EncodeEvent("errors", got)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("decoded %+v (%v) does not encode to the same bytes", got, err)
	}
	b[4] += 9
	_, err = reader.DecodeEvent("errors", b)
	var de *avro.DecodeError
	if !errors.As(err, &de) || de.Check != avro.CheckSchemaID {
		t.Fatalf("unknown id: %v", err)
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 404 {
		t.Errorf("unknown id: the registry's answer is not kept: %v", err)
	}
}
