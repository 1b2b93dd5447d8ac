package intake

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
)

// ErrBadSource means a source specification or a Source is not valid; a *SourceError wraps it.
var ErrBadSource = errors.New("bad source")

// SourceError names the source entry that is not valid and says why. It wraps ErrBadSource.
type SourceError struct {
	// Entry is the specification as given (or the Source's String).
	Entry string
	// Reason says what is wrong.
	Reason string
}

// Error names the entry and the reason.
func (e *SourceError) Error() string { return fmt.Sprintf("source %q: %s", e.Entry, e.Reason) }

// Unwrap returns ErrBadSource.
func (e *SourceError) Unwrap() error { return ErrBadSource }

// DefaultSourceTemporality is the temporality of the failures of a foreign source that
// configures none.
const DefaultSourceTemporality = avro.Permanent

// maxTopicLen is Kafka's limit on topic names.
const maxTopicLen = 249

// Source is one topic that the intake reads failures from, and how to read it.
//
// Its text form (ParseSource, `redrive serve -source`) is
//
//	FORMAT:TOPIC[=ORIGINAL_TOPIC][?OPTION=VALUE[&OPTION=VALUE...]]
//
// with FORMAT one of mpfe, spring, connect, streams, raw, and the options temporality
// (TEMPORARY, PERMANENT or UNKNOWN; default PERMANENT), publisher (the service recorded as the
// one that failed), system (its system) and code (the error code). An mpfe source takes neither
// an original topic nor options: its events carry all of it. docs/configuration.md has examples.
type Source struct {
	// Format is the format of the topic's records. Required.
	Format redrive.SourceFormat
	// Topic is the topic to read. Required.
	Topic string
	// OriginalTopic is where the records go back to when the record does not say: required for
	// raw; for connect, the topic of the records that lack the context headers (without it,
	// such records go to the dead-letter topic); for spring and streams, the topic of a record
	// whose origin header is missing. Not allowed for mpfe.
	OriginalTopic string
	// Temporality of the failures. Defaults to DefaultSourceTemporality (PERMANENT). Not
	// allowed for mpfe.
	Temporality avro.Temporality
	// PublisherService is recorded as the service that failed. Defaults to what the record
	// says (Spring's consumer group, Connect's connector name), else the source topic.
	PublisherService string
	// PublisherSystem is recorded as the system of that service. Defaults to the writer's
	// name: spring-kafka, kafka-connect, kafka-streams, raw.
	PublisherSystem string
	// ErrorCode is recorded as the error code. Defaults to the simple class name of the
	// record's exception (raw: UNKNOWN_EXCEPTION).
	ErrorCode string

	// hashes remembers the stack-trace hashes of the source's recent failures; set by the
	// intake and the reactivator.
	hashes *traceHashes
	// cluster is the Kafka cluster the source's topic is on (Config.Cluster); set by the
	// intake and the reactivator.
	cluster string
}

// String returns the source in its text form.
func (s Source) String() string {
	var b strings.Builder
	b.WriteString(string(s.Format) + ":" + s.Topic)
	if s.OriginalTopic != "" {
		b.WriteString("=" + s.OriginalTopic)
	}
	q := url.Values{}
	if s.Temporality != "" {
		q.Set("temporality", string(s.Temporality))
	}
	if s.PublisherService != "" {
		q.Set("publisher", s.PublisherService)
	}
	if s.PublisherSystem != "" {
		q.Set("system", s.PublisherSystem)
	}
	if s.ErrorCode != "" {
		q.Set("code", s.ErrorCode)
	}
	if len(q) > 0 {
		b.WriteString("?" + q.Encode())
	}
	return b.String()
}

// ParseSource parses the text form of a Source (see Source) and validates it. Its error is a
// *SourceError that names the entry.
func ParseSource(spec string) (Source, error) {
	entry := strings.TrimSpace(spec)
	bad := func(format string, args ...any) (Source, error) {
		return Source{}, &SourceError{Entry: entry, Reason: fmt.Sprintf(format, args...)}
	}
	format, rest, ok := strings.Cut(entry, ":")
	if !ok {
		return bad("want FORMAT:TOPIC, e.g. spring:orders.DLT")
	}
	s := Source{Format: redrive.SourceFormat(strings.ToLower(strings.TrimSpace(format)))}
	rest, query, hasQuery := strings.Cut(rest, "?")
	s.Topic, s.OriginalTopic, _ = strings.Cut(rest, "=")
	s.Topic, s.OriginalTopic = strings.TrimSpace(s.Topic), strings.TrimSpace(s.OriginalTopic)
	if hasQuery {
		opts, err := url.ParseQuery(query)
		if err != nil {
			return bad("options %q: %v", query, err)
		}
		for k, vs := range opts {
			if len(vs) != 1 {
				return bad("option %q given %d times", k, len(vs))
			}
			v := strings.TrimSpace(vs[0])
			switch k {
			case "temporality":
				s.Temporality = avro.Temporality(strings.ToUpper(v))
			case "publisher":
				s.PublisherService = v
			case "system":
				s.PublisherSystem = v
			case "code":
				s.ErrorCode = v
			default:
				return bad("unknown option %q (want temporality, publisher, system or code)", k)
			}
			if v == "" {
				return bad("option %q is empty", k)
			}
		}
	}
	if err := s.validate(); err != nil {
		var se *SourceError
		if errors.As(err, &se) {
			se.Entry = entry
		}
		return Source{}, err
	}
	return s, nil
}

// ParseSources parses a list of sources separated by commas or newlines (REDRIVE_SOURCES);
// empty entries are skipped. The error joins one *SourceError per bad entry.
func ParseSources(list string) ([]Source, error) {
	var out []Source
	var errs []error
	for _, line := range strings.Split(list, "\n") {
		for _, entry := range strings.Split(line, ",") {
			if strings.TrimSpace(entry) == "" {
				continue
			}
			s, err := ParseSource(entry)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, s)
		}
	}
	return out, errors.Join(errs...)
}

// validate checks s alone (Config.validate checks the sources together).
func (s Source) validate() error {
	bad := func(format string, args ...any) error {
		return &SourceError{Entry: s.String(), Reason: fmt.Sprintf(format, args...)}
	}
	if !s.Format.Valid() {
		return bad("format %q is not one of mpfe, spring, connect, streams, raw", string(s.Format))
	}
	if err := checkTopicName(s.Topic); err != "" {
		return bad("topic %s", err)
	}
	if s.OriginalTopic != "" {
		if err := checkTopicName(s.OriginalTopic); err != "" {
			return bad("original topic %s", err)
		}
		if s.OriginalTopic == s.Topic {
			return bad("the original topic is the source topic: a resend would feed the dead-letter topic itself")
		}
	}
	if s.Format == redrive.SourceMPFE {
		if s.OriginalTopic != "" || s.Temporality != "" || s.PublisherService != "" || s.PublisherSystem != "" || s.ErrorCode != "" {
			return bad("an mpfe source takes no original topic and no options: its events carry them")
		}
		return nil
	}
	if s.Format == redrive.SourceRaw && s.OriginalTopic == "" {
		return bad("a raw source needs its original topic: raw:%s=ORIGINAL_TOPIC", s.Topic)
	}
	if s.Temporality != "" && !s.Temporality.Valid() {
		return bad("temporality %q is not TEMPORARY, PERMANENT or UNKNOWN", string(s.Temporality))
	}
	for _, o := range []struct{ name, value string }{
		{"publisher", s.PublisherService}, {"system", s.PublisherSystem}, {"code", s.ErrorCode},
	} {
		if len(o.value) > redrive.MaxKeyText/2 {
			return bad("option %s is %d bytes, at most %d", o.name, len(o.value), redrive.MaxKeyText/2)
		}
	}
	return nil
}

// checkTopicName says why name is not a valid Kafka topic name, or "".
func checkTopicName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > maxTopicLen:
		return fmt.Sprintf("is %d characters, at most %d", len(name), maxTopicLen)
	case name == "." || name == "..":
		return fmt.Sprintf("%q is not allowed", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("%q has the character %q (allowed: letters, digits, '.', '_', '-')", name, c)
		}
	}
	return ""
}

// temporality returns the configured temporality or the default.
func (s *Source) temporality() avro.Temporality {
	if s.Temporality == "" {
		return DefaultSourceTemporality
	}
	return s.Temporality
}

// system returns the configured publisher system or the writer's name.
func (s *Source) system() string {
	if s.PublisherSystem != "" {
		return s.PublisherSystem
	}
	switch s.Format {
	case redrive.SourceSpring:
		return "spring-kafka"
	case redrive.SourceConnect:
		return "kafka-connect"
	case redrive.SourceStreams:
		return "kafka-streams"
	}
	return string(s.Format)
}
