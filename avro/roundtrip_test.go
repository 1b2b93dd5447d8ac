package avro_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/avro"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

var alphabet = []rune("aZ09 -_/.é☃\u0000\n\"\\<>日本語🙂")

func randString(r *rand.Rand, n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return sb.String()
}

func randOptString(r *rand.Rand) *string {
	if r.IntN(3) == 0 {
		return nil
	}
	return avro.Ptr(randString(r, r.IntN(20)))
}

func randTime(r *rand.Rand) time.Time {
	return time.UnixMilli(r.Int64N(1 << 45)).UTC()
}

// randEvent returns a random event that exercises every field: all byte values, empty and large
// payloads, offsets above 2^53, non-ASCII strings, null and empty optional values.
func randEvent(r *rand.Rand) *avro.Event {
	sizes := []int{0, 1, 255, 4096, 1 << 20}
	temps := []avro.Temporality{avro.Temporary, avro.Permanent, avro.Unknown}
	e := &avro.Event{
		Identity:  avro.Identity{EventID: randString(r, 36), IdempotenceID: randString(r, 36), Created: randTime(r)},
		Type:      avro.EventType{Name: avro.EventTypeName, Version: avro.EventTypeVersion, Variant: randOptString(r)},
		Publisher: avro.Publisher{System: randString(r, 5), Service: randString(r, 8)},
		References: avro.References{
			Message: avro.MessageReference{Type: avro.MessageReferenceType, TopicName: randString(r, 12),
				Partition: r.Int32N(math.MaxInt32), Offset: (1 << 53) + r.Int64N(math.MaxInt64-(1<<53))},
			ErrorType: avro.ErrorTypeReference{Type: avro.ErrorTypeException, Temporality: temps[r.IntN(3)], Code: randString(r, 10)},
		},
		Payload: avro.Payload{
			OriginalMessage:  randBytes(r, sizes[r.IntN(len(sizes))]),
			ErrorMessage:     randString(r, r.IntN(200)),
			ErrorDescription: randOptString(r),
			StackTrace:       randOptString(r),
			StackTraceHash:   randOptString(r),
		},
		ProcessID:          randOptString(r),
		DomainEventVersion: avro.DomainEventVersion,
	}
	if r.IntN(4) > 0 {
		e.Payload.OriginalKey = randBytes(r, r.IntN(40))
	}
	if r.IntN(4) > 0 {
		md := &avro.Metadata{EventID: randOptString(r), IdempotenceID: randOptString(r), System: randOptString(r),
			Service: randOptString(r), MessageTypeName: randOptString(r), MessageTypeVersion: randOptString(r)}
		if r.IntN(2) == 0 {
			t := randTime(r)
			md.Created = &t
		}
		var hs []avro.Header
		for i := r.IntN(6); i > 0; i-- {
			h := avro.Header{Name: randString(r, 1+r.IntN(3))}
			if r.IntN(4) > 0 {
				h.Value = randBytes(r, r.IntN(300))
			}
			hs = append(hs, h)
		}
		if err := md.SetHeaders(hs); err != nil {
			panic(err)
		}
		e.Payload.FailedMessageMetadata = md
	}
	return e
}

func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	codec, err := avro.NewCodec(avro.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := 300
	if testing.Short() {
		n = 50
	}
	for i := 0; i < n; i++ {
		e := randEvent(r)
		b, err := codec.EncodeEvent("errors", e)
		if err != nil {
			t.Fatalf("event %d: encode: %v", i, err)
		}
		got, err := codec.DecodeEvent("errors", b)
		if err != nil {
			t.Fatalf("event %d: decode: %v", i, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("event %d: round trip differs:\n got %+v\nwant %+v", i, got, e)
		}
		js, err := avro.EventJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := avro.ParseEventJSON(js)
		if err != nil {
			t.Fatalf("event %d: JSON: %v", i, err)
		}
		if !reflect.DeepEqual(fromJSON, e) {
			t.Fatalf("event %d: JSON round trip differs", i)
		}
	}
}

func TestHeadersExact(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	hs := []avro.Header{
		{Name: "b", Value: []byte("1")},
		{Name: "a", Value: nil},
		{Name: "b", Value: []byte("2")},
		{Name: "bin", Value: all},
		{Name: "empty", Value: []byte{}},
	}
	var md avro.Metadata
	if err := md.SetHeaders(hs); err != nil {
		t.Fatal(err)
	}
	if got := md.Headers["b"]; string(got) != "2" {
		t.Errorf("plain entry b = %q, want the last value", got)
	}
	if got, ok := md.Headers["a"]; !ok || got == nil || len(got) != 0 {
		t.Errorf("plain entry a = %v, want empty bytes for a null value", got)
	}
	got, err := md.OriginalHeaders()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, hs) {
		t.Fatalf("OriginalHeaders = %+v, want %+v", got, hs)
	}
	// A reader without the entry falls back to the map, ordered by name.
	delete(md.Headers, avro.HeadersEntry)
	got, _ = md.OriginalHeaders()
	if len(got) != 4 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("map fallback = %+v", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	codec, err := avro.NewCodec(avro.Config{MaxSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	good := read(t, "temporary-with-metadata.single.bin")
	confluent := read(t, "minimal-permanent.confluent7.bin")
	withTemp := func(temp string) []byte {
		e, _ := avro.ParseEventJSON(read(t, "minimal-permanent.json"))
		e.References.ErrorType.Temporality = avro.Temporality(temp)
		// Build a datum that bypasses Validate by encoding a valid event and patching the string.
		e2 := *e
		e2.References.ErrorType.Temporality = avro.Permanent
		b, err := avro.EncodeEventWith(&e2, -1)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Replace(b, []byte("\x12PERMANENT"), append([]byte{byte(len(temp) * 2)}, temp...), 1)
	}
	withOffset := func(off string) []byte {
		b := read(t, "minimal-permanent.single.bin")
		return bytes.Replace(b, []byte("\x084711"), append([]byte{byte(len(off) * 2)}, off...), 1)
	}
	tests := []struct {
		name  string
		in    []byte
		check avro.Check
		is    error
	}{
		{"empty", nil, avro.CheckEmpty, avro.ErrEmpty},
		{"too large", make([]byte, 1<<16+1), avro.CheckSizeLimit, avro.ErrTooLarge},
		{"unknown first byte", []byte{0x7b, '"', 'a'}, avro.CheckFirstByte, avro.ErrUnknownFraming},
		{"bad second magic byte", append([]byte{0xC3, 0x02}, good[2:]...), avro.CheckFirstByte, avro.ErrUnknownFraming},
		{"fingerprint", append([]byte{0xC3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, good[10:]...), avro.CheckFingerprint, avro.ErrFingerprint},
		{"short single header", good[:6], avro.CheckTruncated, avro.ErrTruncated},
		{"short confluent header", confluent[:3], avro.CheckTruncated, avro.ErrTruncated},
		{"truncated datum", good[:len(good)-7], avro.CheckTruncated, avro.ErrTruncated},
		{"truncated confluent datum", confluent[:40], avro.CheckTruncated, avro.ErrTruncated},
		{"trailing bytes", append(append([]byte{}, good...), 0, 0), avro.CheckTrailing, avro.ErrTrailingBytes},
		{"bad temporality", withTemp("SOMETIMES"), avro.CheckTemporality, avro.ErrBadTemporality},
		{"lowercase temporality", withTemp("permanent"), avro.CheckTemporality, avro.ErrBadTemporality},
		{"non-numeric offset", withOffset("47x1"), avro.CheckNumber, avro.ErrBadNumber},
		{"float offset", withOffset("4.71"), avro.CheckNumber, avro.ErrBadNumber},
		{"negative offset", withOffset("-471"), avro.CheckNumber, avro.ErrBadNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := codec.DecodeEvent("errors", tt.in)
			var de *avro.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v (%T), want *DecodeError", err, err)
			}
			if de.Check != tt.check || !errors.Is(err, tt.is) {
				t.Fatalf("err = %v (check %q), want check %q", err, de.Check, tt.check)
			}
			if !strings.HasPrefix(err.Error(), string(tt.check)) {
				t.Fatalf("message %q does not start with the check", err)
			}
		})
	}
}

func TestEncodeRejectsBadTemporality(t *testing.T) {
	e, _ := avro.ParseEventJSON(read(t, "minimal-permanent.json"))
	e.References.ErrorType.Temporality = "MAYBE"
	if _, err := avro.MarshalEvent(e); !errors.Is(err, avro.ErrBadTemporality) {
		t.Fatalf("err = %v", err)
	}
}

func TestNewCodecRejectsNegativeSize(t *testing.T) {
	if _, err := avro.NewCodec(avro.Config{MaxSize: -1}); err == nil || !strings.Contains(err.Error(), "invalid config") {
		t.Fatalf("err = %v", err)
	}
}
