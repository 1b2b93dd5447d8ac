package errorhandler

import "time"

// MessageInfo is what an Extractor knows about a failed message itself. Empty fields are left
// out of the MPFE's failedMessageMetadata.
type MessageInfo struct {
	// ID is the message's own id. It becomes failedMessageMetadata.eventId and the MPFE's Kafka
	// key, so that all failures of one message stay in order on one partition.
	ID string
	// IdempotenceID is the message's own idempotence id.
	IdempotenceID string
	// Type and Version name the message's type.
	Type    string
	Version string
	// System and Service name the message's publisher.
	System  string
	Service string
	// Created is when the message was created.
	Created time.Time
}

// Extractor reads what it can about a failed message, e.g. from its headers. It must not
// modify msg.
type Extractor func(msg *Message) MessageInfo

// HeaderNames names the headers a HeaderExtractor reads; an empty name is not read.
type HeaderNames struct {
	ID            string
	IdempotenceID string
	Type          string
	Version       string
	System        string
	Service       string
}

// HeaderExtractor returns an Extractor that reads the message's id, type and version from the
// named headers (the last header of a name wins).
func HeaderExtractor(names HeaderNames) Extractor {
	return func(msg *Message) MessageInfo {
		var info MessageInfo
		for _, h := range msg.Headers {
			v := string(h.Value)
			switch h.Key {
			case "":
			case names.ID:
				info.ID = v
			case names.IdempotenceID:
				info.IdempotenceID = v
			case names.Type:
				info.Type = v
			case names.Version:
				info.Version = v
			case names.System:
				info.System = v
			case names.Service:
				info.Service = v
			}
		}
		return info
	}
}
