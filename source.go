package redrive

import "strings"

// SourceFormat is the format of a topic the intake reads failures from.
type SourceFormat string

// The source formats (docs/intake.md).
const (
	// SourceMPFE: MessageProcessingFailedEvents (redrive's middleware, jEAP).
	SourceMPFE SourceFormat = "mpfe"
	// SourceSpring: a dead-letter topic written by Spring Kafka's DeadLetterPublishingRecoverer.
	SourceSpring SourceFormat = "spring"
	// SourceConnect: a Kafka Connect sink connector's dead-letter queue.
	SourceConnect SourceFormat = "connect"
	// SourceStreams: a Kafka Streams dead-letter queue (KIP-1034).
	SourceStreams SourceFormat = "streams"
	// SourceRaw: a plain copy of the failed records; the origin topic is configured.
	SourceRaw SourceFormat = "raw"
)

// SourceFormats lists every source format.
var SourceFormats = []SourceFormat{SourceMPFE, SourceSpring, SourceConnect, SourceStreams, SourceRaw}

// Valid reports whether f is one of the source formats.
func (f SourceFormat) Valid() bool {
	switch f {
	case SourceMPFE, SourceSpring, SourceConnect, SourceStreams, SourceRaw:
		return true
	}
	return false
}

// ErrorHeaderPrefix returns the name prefix of the headers that the format's writer adds to a
// dead-lettered record ("kafka_dlt-", "__connect.errors.", "__streams.errors."), or "" for the
// formats that add none to the stored record (mpfe, raw).
func (f SourceFormat) ErrorHeaderPrefix() string {
	switch f {
	case SourceSpring:
		return "kafka_dlt-"
	case SourceConnect:
		return "__connect.errors."
	case SourceStreams:
		return "__streams.errors."
	}
	return ""
}

// IsErrorHeader reports whether a header named name was added by the format's writer and is not
// one of the original record's headers: a resend leaves it out.
func (f SourceFormat) IsErrorHeader(name string) bool {
	p := f.ErrorHeaderPrefix()
	return p != "" && strings.HasPrefix(name, p)
}

// UnknownPosition is the original partition or offset of a failure whose source does not tell
// them (a raw source, a Connect record without context headers). As a partition it is also
// librdkafka's "any partition".
const UnknownPosition = -1

// Source says where the intake read a failure: the format of the topic and the record's
// position on it.
type Source struct {
	// Format is the source's format. The zero value means SourceMPFE.
	Format SourceFormat
	// Topic, Partition and Offset locate the record on the source topic. An empty Topic means
	// unknown (the row's source_topic, source_partition and source_offset are NULL).
	Topic     string
	Partition int32
	Offset    int64
	// Cluster names the Kafka cluster the intake read the record from (ValidateClusterName).
	// Empty means DefaultCluster.
	Cluster string
}
