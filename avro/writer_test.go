package avro

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// goavro's generic encoder is the independent reference for the hand-written writer.

func optString(s *string) any {
	if s == nil {
		return nil
	}
	return map[string]any{branchString: *s}
}

func optBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return map[string]any{branchBytes: b}
}

func optTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return map[string]any{branchTimestamp: t.UTC()}
}

func nativeFromEvent(e *Event) map[string]any {
	p := &e.Payload
	payload := map[string]any{
		"originalMessage":       nonNil(p.OriginalMessage),
		"originalKey":           optBytes(p.OriginalKey),
		"errorMessage":          p.ErrorMessage,
		"errorDescription":      optString(p.ErrorDescription),
		"stackTrace":            optString(p.StackTrace),
		"stackTraceHash":        optString(p.StackTraceHash),
		"failedMessageMetadata": nil,
	}
	if m := p.FailedMessageMetadata; m != nil {
		headers := make(map[string]any, len(m.Headers))
		for k, v := range m.Headers {
			headers[k] = nonNil(v)
		}
		payload["failedMessageMetadata"] = map[string]any{branchMetadata: map[string]any{
			"eventId":            optString(m.EventID),
			"idempotenceId":      optString(m.IdempotenceID),
			"created":            optTime(m.Created),
			"system":             optString(m.System),
			"service":            optString(m.Service),
			"messageTypeName":    optString(m.MessageTypeName),
			"messageTypeVersion": optString(m.MessageTypeVersion),
			"headers":            headers,
		}}
	}
	return map[string]any{
		"identity": map[string]any{
			"eventId":       e.Identity.EventID,
			"idempotenceId": e.Identity.IdempotenceID,
			"created":       e.Identity.Created.UTC(),
		},
		"type": map[string]any{
			"name":    e.Type.Name,
			"version": e.Type.Version,
			"variant": optString(e.Type.Variant),
		},
		"publisher": map[string]any{
			"system":  e.Publisher.System,
			"service": e.Publisher.Service,
		},
		"references": map[string]any{
			"message": map[string]any{
				"type":      e.References.Message.Type,
				"topicName": e.References.Message.TopicName,
				"partition": strconv.FormatInt(int64(e.References.Message.Partition), 10),
				"offset":    strconv.FormatInt(e.References.Message.Offset, 10),
			},
			"errorType": map[string]any{
				"type":        e.References.ErrorType.Type,
				"temporality": string(e.References.ErrorType.Temporality),
				"code":        e.References.ErrorType.Code,
			},
		},
		"payload":            payload,
		"processId":          optString(e.ProcessID),
		"domainEventVersion": e.DomainEventVersion,
	}
}

// TestWriterMatchesGoavro: AppendEvent writes the same bytes as goavro's encoder (where map order
// cannot differ) and what it writes decodes to the same event.
func TestWriterMatchesGoavro(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 500; i++ {
		e := sampleEvent(r)
		got, err := AppendEvent(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := mustBuiltin().event.codec.BinaryFromNative(nil, nativeFromEvent(e))
		if err != nil {
			t.Fatal(err)
		}
		md := e.Payload.FailedMessageMetadata
		if md == nil || len(md.Headers) < 2 {
			if !bytes.Equal(got, want) {
				t.Fatalf("event %d: writer\n%x\ngoavro\n%x", i, got, want)
			}
		}
		back, err := UnmarshalEvent(got)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("event %d: decodes to another event", i)
		}
	}
}

// TestWriterHeaderListMatchesSetHeaders: writing the map from a HeaderList gives the event that
// Metadata.SetHeaders describes.
func TestWriterHeaderListMatchesSetHeaders(t *testing.T) {
	hs := Headers{{"b", []byte("1")}, {"a", nil}, {"b", []byte("2")}, {HeadersEntry, []byte("x")}, {"e", []byte{}}}
	e := sampleEvent(rand.New(rand.NewPCG(5, 6)))
	e.Payload.FailedMessageMetadata = &Metadata{}
	got, err := AppendEventHeaders(nil, e, hs)
	if err != nil {
		t.Fatal(err)
	}
	want := *e
	md := &Metadata{}
	if err := md.SetHeaders(hs); err != nil {
		t.Fatal(err)
	}
	want.Payload.FailedMessageMetadata = md
	back, err := UnmarshalEvent(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, &want) {
		t.Fatalf("decoded %+v\nwant %+v", back.Payload.FailedMessageMetadata, md)
	}
	list, err := back.Payload.FailedMessageMetadata.OriginalHeaders()
	if err != nil || !reflect.DeepEqual(Headers(list), hs) {
		t.Fatalf("OriginalHeaders = %v, %v", list, err)
	}
}

func sampleEvent(r *rand.Rand) *Event {
	str := func() string { return strconv.Itoa(r.IntN(1 << 30)) }
	opt := func() *string {
		if r.IntN(2) == 0 {
			return nil
		}
		return Ptr("é☃" + str())
	}
	temps := []Temporality{Temporary, Permanent, Unknown}
	e := &Event{
		Identity:  Identity{EventID: str(), IdempotenceID: str(), Created: time.UnixMilli(r.Int64N(1 << 42)).UTC()},
		Type:      EventType{Name: EventTypeName, Version: EventTypeVersion, Variant: opt()},
		Publisher: Publisher{System: str(), Service: str()},
		References: References{Message: MessageReference{Type: MessageReferenceType, TopicName: str(), Partition: r.Int32(), Offset: r.Int64()},
			ErrorType: ErrorTypeReference{Type: ErrorTypeException, Temporality: temps[r.IntN(3)], Code: str()}},
		Payload:            Payload{OriginalMessage: make([]byte, r.IntN(300)), ErrorMessage: str(), ErrorDescription: opt(), StackTrace: opt(), StackTraceHash: opt()},
		ProcessID:          opt(),
		DomainEventVersion: DomainEventVersion,
	}
	for i := range e.Payload.OriginalMessage {
		e.Payload.OriginalMessage[i] = byte(r.UintN(256))
	}
	if r.IntN(2) == 0 {
		e.Payload.OriginalKey = []byte(str())
	}
	if r.IntN(3) > 0 {
		md := &Metadata{EventID: opt(), IdempotenceID: opt(), System: opt(), Service: opt(), MessageTypeName: opt(), MessageTypeVersion: opt(), Headers: map[string][]byte{}}
		if r.IntN(2) == 0 {
			c := time.UnixMilli(r.Int64N(1 << 42)).UTC()
			md.Created = &c
		}
		for j := r.IntN(4); j > 0; j-- {
			md.Headers[str()] = []byte(str())
		}
		e.Payload.FailedMessageMetadata = md
	}
	return e
}
