package avro_test

import (
	"testing"

	"github.com/redrive/redrive/avro"
)

func benchEvent(b *testing.B) (*avro.Codec, *avro.Event, []byte) {
	b.Helper()
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := codec.DecodeEvent("errors", mustRead(b, "temporary-with-metadata.single.bin"))
	if err != nil {
		b.Fatal(err)
	}
	e.Payload.OriginalMessage = make([]byte, 512)
	raw, err := codec.EncodeEvent("errors", e)
	if err != nil {
		b.Fatal(err)
	}
	return codec, e, raw
}

func mustRead(b *testing.B, name string) []byte {
	b.Helper()
	data, err := readFile(name)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func BenchmarkEncodeEvent(b *testing.B) {
	codec, e, raw := benchEvent(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codec.EncodeEvent("errors", e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	codec, _, raw := benchEvent(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codec.DecodeEvent("errors", raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeKey(b *testing.B) {
	codec, _, _ := benchEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codec.EncodeKey("errors", avro.Key{Key: "4b7f6f1e-1d2c-4e3b-8a9f-0c1d2e3f4a01"}); err != nil {
			b.Fatal(err)
		}
	}
}
