package store

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redrive/redrive/avro"
)

// ValidateIncoming returns a *BadDataError when Postgres cannot store in as it is: an empty
// idempotenceId, text that is not UTF-8 or holds a NUL character, a bad temporality, a time
// outside years 1 to 9999, an indexed text over MaxKeyText or a group key over MaxGroupKey.
func ValidateIncoming(in Incoming) error {
	_, err := validateIncoming(-1, in)
	return err
}

// classify marks the database errors that depend on the data and that retrying cannot fix as
// bad data: data exceptions (class 22) and program limits (class 54, e.g. an index row too
// large). Constraint violations are not among them: Ingest writes only valid rows, so one means
// a schema that does not match this binary, which retrying after an upgrade fixes.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	if strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "54") {
		return &BadDataError{Index: -1, Reason: "the database refused the batch: " + pgErr.Message, Err: err}
	}
	return err
}

// Time bounds that every client and Postgres agree on.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// validateIncoming checks in (ValidateIncoming) and returns its causing message; i is its index
// in the batch for the error, -1 for none.
func validateIncoming(i int, in Incoming) (string, error) {
	bad := func(field, format string, args ...any) (string, error) {
		return "", &BadDataError{Index: i, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	e := in.Event
	if e == nil {
		return bad("", "no event")
	}
	if f := sourceFormat(in.Source); !f.Valid() {
		return bad("source.format", "%q is not a source format", string(f))
	}
	if err := checkText(in.Source.Topic); err != "" {
		return bad("source.topic", "%s", err)
	}
	if len(in.Source.Topic) > MaxKeyText {
		return bad("source.topic", "%d bytes, limit %d", len(in.Source.Topic), MaxKeyText)
	}
	if e.Identity.IdempotenceID == "" {
		return bad("identity.idempotenceId", "empty")
	}
	if !e.References.ErrorType.Temporality.Valid() {
		return bad("references.errorType.temporality", "%q is not TEMPORARY, PERMANENT or UNKNOWN", string(e.References.ErrorType.Temporality))
	}
	p := &e.Payload
	texts := []struct {
		field string
		value *string
	}{
		{"identity.eventId", &e.Identity.EventID},
		{"identity.idempotenceId", &e.Identity.IdempotenceID},
		{"publisher.system", &e.Publisher.System},
		{"publisher.service", &e.Publisher.Service},
		{"references.message.topicName", &e.References.Message.TopicName},
		{"references.errorType.code", &e.References.ErrorType.Code},
		{"payload.errorMessage", &p.ErrorMessage},
		{"payload.errorDescription", p.ErrorDescription},
		{"payload.stackTrace", p.StackTrace},
		{"payload.stackTraceHash", p.StackTraceHash},
		{"processId", e.ProcessID},
	}
	if md := p.FailedMessageMetadata; md != nil {
		texts = append(texts, []struct {
			field string
			value *string
		}{
			{"failedMessageMetadata.eventId", md.EventID},
			{"failedMessageMetadata.idempotenceId", md.IdempotenceID},
			{"failedMessageMetadata.system", md.System},
			{"failedMessageMetadata.service", md.Service},
			{"failedMessageMetadata.messageTypeName", md.MessageTypeName},
			{"failedMessageMetadata.messageTypeVersion", md.MessageTypeVersion},
		}...)
		if md.Created != nil && (md.Created.Before(minTime) || md.Created.After(maxTime)) {
			return bad("failedMessageMetadata.created", "%s is outside years 1 to 9999", md.Created)
		}
	}
	for _, t := range texts {
		if t.value != nil {
			if err := checkText(*t.value); err != "" {
				return bad(t.field, "%s", err)
			}
		}
	}
	for j, h := range in.Headers {
		if err := checkText(h.Name); err != "" {
			return bad(fmt.Sprintf("headers[%d].name", j), "%s", err)
		}
	}
	cm := in.causingMessage()
	if err := checkText(cm); err != "" {
		return bad("causing message ("+avro.HeaderOrigin+" header)", "%s", err)
	}
	for _, t := range []struct{ field, value string }{
		{"identity.idempotenceId", e.Identity.IdempotenceID},
		{"causing message", cm},
		{"references.message.topicName", e.References.Message.TopicName},
		{"publisher.service", e.Publisher.Service},
	} {
		if len(t.value) > MaxKeyText {
			return bad(t.field, "%d bytes, limit %d", len(t.value), MaxKeyText)
		}
	}
	if n := len(e.Publisher.Service) + len(e.References.ErrorType.Code) + len(deref(p.StackTraceHash)) + len(messageType(e)); n > MaxGroupKey {
		return bad("group key", "publisher.service, messageTypeName, errorType.code and stackTraceHash take %d bytes, limit %d", n, MaxGroupKey)
	}
	if c := e.Identity.Created; c.Before(minTime) || c.After(maxTime) {
		return bad("identity.created", "%s is outside years 1 to 9999", c)
	}
	return cm, nil
}

// checkText says why Postgres cannot store s as text, or "".
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL character"
	}
	return ""
}
