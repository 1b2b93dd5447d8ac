package avro

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redrive/redrive/internal/jsonstrict"
)

// The JSON shape of the contract's test vectors: records as objects in field order, bytes as
// {"base64": …}, timestamps as {"millis": …}, null as null.

type jsonBytes struct {
	Base64 string `json:"base64"`
}

type jsonMillis struct {
	Millis *int64 `json:"millis"`
}

type jsonEvent struct {
	Identity struct {
		EventID       string     `json:"eventId"`
		IdempotenceID string     `json:"idempotenceId"`
		Created       jsonMillis `json:"created"`
	} `json:"identity"`
	Type struct {
		Name    string  `json:"name"`
		Version string  `json:"version"`
		Variant *string `json:"variant"`
	} `json:"type"`
	Publisher struct {
		System  string `json:"system"`
		Service string `json:"service"`
	} `json:"publisher"`
	References struct {
		Message struct {
			Type      string `json:"type"`
			TopicName string `json:"topicName"`
			Partition string `json:"partition"`
			Offset    string `json:"offset"`
		} `json:"message"`
		ErrorType struct {
			Type        string `json:"type"`
			Temporality string `json:"temporality"`
			Code        string `json:"code"`
		} `json:"errorType"`
	} `json:"references"`
	Payload struct {
		OriginalMessage       *jsonBytes    `json:"originalMessage"`
		OriginalKey           *jsonBytes    `json:"originalKey"`
		ErrorMessage          string        `json:"errorMessage"`
		ErrorDescription      *string       `json:"errorDescription"`
		StackTrace            *string       `json:"stackTrace"`
		StackTraceHash        *string       `json:"stackTraceHash"`
		FailedMessageMetadata *jsonMetadata `json:"failedMessageMetadata"`
	} `json:"payload"`
	ProcessID          *string `json:"processId"`
	DomainEventVersion string  `json:"domainEventVersion"`
}

type jsonMetadata struct {
	EventID            *string              `json:"eventId"`
	IdempotenceID      *string              `json:"idempotenceId"`
	Created            *jsonMillis          `json:"created"`
	System             *string              `json:"system"`
	Service            *string              `json:"service"`
	MessageTypeName    *string              `json:"messageTypeName"`
	MessageTypeVersion *string              `json:"messageTypeVersion"`
	Headers            map[string]jsonBytes `json:"headers"`
}

func toJSONBytes(b []byte) *jsonBytes {
	if b == nil {
		return nil
	}
	return &jsonBytes{Base64: base64.StdEncoding.EncodeToString(b)}
}

func millis(t time.Time) jsonMillis {
	ms := t.UnixMilli()
	return jsonMillis{Millis: &ms}
}

// EventJSON renders e in the JSON shape of the contract's test vectors, indented by one space.
func EventJSON(e *Event) ([]byte, error) {
	var j jsonEvent
	j.Identity.EventID = e.Identity.EventID
	j.Identity.IdempotenceID = e.Identity.IdempotenceID
	j.Identity.Created = millis(e.Identity.Created)
	j.Type.Name, j.Type.Version, j.Type.Variant = e.Type.Name, e.Type.Version, e.Type.Variant
	j.Publisher.System, j.Publisher.Service = e.Publisher.System, e.Publisher.Service
	m := &j.References.Message
	m.Type, m.TopicName = e.References.Message.Type, e.References.Message.TopicName
	m.Partition = fmt.Sprint(e.References.Message.Partition)
	m.Offset = fmt.Sprint(e.References.Message.Offset)
	et := &j.References.ErrorType
	et.Type, et.Temporality, et.Code = e.References.ErrorType.Type, string(e.References.ErrorType.Temporality), e.References.ErrorType.Code
	p := &j.Payload
	p.OriginalMessage = toJSONBytes(nonNil(e.Payload.OriginalMessage))
	p.OriginalKey = toJSONBytes(e.Payload.OriginalKey)
	p.ErrorMessage = e.Payload.ErrorMessage
	p.ErrorDescription, p.StackTrace, p.StackTraceHash = e.Payload.ErrorDescription, e.Payload.StackTrace, e.Payload.StackTraceHash
	if md := e.Payload.FailedMessageMetadata; md != nil {
		jm := &jsonMetadata{
			EventID: md.EventID, IdempotenceID: md.IdempotenceID, System: md.System, Service: md.Service,
			MessageTypeName: md.MessageTypeName, MessageTypeVersion: md.MessageTypeVersion,
			Headers: make(map[string]jsonBytes, len(md.Headers)),
		}
		if md.Created != nil {
			c := millis(*md.Created)
			jm.Created = &c
		}
		for k, v := range md.Headers {
			jm.Headers[k] = *toJSONBytes(nonNil(v))
		}
		p.FailedMessageMetadata = jm
	}
	j.ProcessID = e.ProcessID
	j.DomainEventVersion = e.DomainEventVersion
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(&j); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ParseEventJSON reads an event from the JSON shape that EventJSON writes. Member names must
// match exactly, case included, and appear once per object; unknown members, missing required
// values, bad base64 and bad numbers are errors that name the member and where it is (a
// *jsonstrict.Error for the JSON itself).
func ParseEventJSON(data []byte) (*Event, error) {
	var j jsonEvent
	if err := jsonstrict.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("event JSON: %w", err)
	}
	var err error
	e := &Event{}
	e.Identity.EventID, e.Identity.IdempotenceID = j.Identity.EventID, j.Identity.IdempotenceID
	if j.Identity.Created.Millis == nil {
		return nil, fmt.Errorf("event JSON: identity.created: want {\"millis\": N}")
	}
	e.Identity.Created = time.UnixMilli(*j.Identity.Created.Millis).UTC()
	e.Type = EventType{Name: j.Type.Name, Version: j.Type.Version, Variant: j.Type.Variant}
	e.Publisher = Publisher{System: j.Publisher.System, Service: j.Publisher.Service}
	m := j.References.Message
	e.References.Message = MessageReference{Type: m.Type, TopicName: m.TopicName}
	if _, err := fmt.Sscan(m.Partition, &e.References.Message.Partition); err != nil || fmt.Sprint(e.References.Message.Partition) != m.Partition {
		return nil, fmt.Errorf("event JSON: references.message.partition: %q is not a decimal int32", m.Partition)
	}
	if _, err := fmt.Sscan(m.Offset, &e.References.Message.Offset); err != nil || fmt.Sprint(e.References.Message.Offset) != m.Offset {
		return nil, fmt.Errorf("event JSON: references.message.offset: %q is not a decimal int64", m.Offset)
	}
	et := j.References.ErrorType
	e.References.ErrorType = ErrorTypeReference{Type: et.Type, Temporality: Temporality(et.Temporality), Code: et.Code}
	p := j.Payload
	if p.OriginalMessage == nil {
		return nil, fmt.Errorf("event JSON: payload.originalMessage: want {\"base64\": …}")
	}
	if e.Payload.OriginalMessage, err = fromJSONBytes(p.OriginalMessage, "payload.originalMessage"); err != nil {
		return nil, err
	}
	if e.Payload.OriginalKey, err = fromJSONBytes(p.OriginalKey, "payload.originalKey"); err != nil {
		return nil, err
	}
	e.Payload.ErrorMessage = p.ErrorMessage
	e.Payload.ErrorDescription, e.Payload.StackTrace, e.Payload.StackTraceHash = p.ErrorDescription, p.StackTrace, p.StackTraceHash
	if jm := p.FailedMessageMetadata; jm != nil {
		md := &Metadata{
			EventID: jm.EventID, IdempotenceID: jm.IdempotenceID, System: jm.System, Service: jm.Service,
			MessageTypeName: jm.MessageTypeName, MessageTypeVersion: jm.MessageTypeVersion,
			Headers: make(map[string][]byte, len(jm.Headers)),
		}
		if jm.Created != nil {
			if jm.Created.Millis == nil {
				return nil, fmt.Errorf("event JSON: payload.failedMessageMetadata.created: want {\"millis\": N} or null")
			}
			t := time.UnixMilli(*jm.Created.Millis).UTC()
			md.Created = &t
		}
		for k, v := range jm.Headers {
			b, err := fromJSONBytes(&v, fmt.Sprintf("payload.failedMessageMetadata.headers[%q]", k))
			if err != nil {
				return nil, err
			}
			md.Headers[k] = b
		}
		e.Payload.FailedMessageMetadata = md
	}
	e.ProcessID = j.ProcessID
	e.DomainEventVersion = j.DomainEventVersion
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("event JSON: %w", err)
	}
	return e, nil
}

func fromJSONBytes(j *jsonBytes, field string) ([]byte, error) {
	if j == nil {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(j.Base64)
	if err != nil {
		return nil, fmt.Errorf("event JSON: %s: bad base64: %w", field, err)
	}
	return b, nil
}
