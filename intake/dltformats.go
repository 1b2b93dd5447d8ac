package intake

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
)

// Spring Kafka's DeadLetterPublishingRecoverer headers (KafkaHeaders.DLT_*).
const (
	springTopic         = "kafka_dlt-original-topic"
	springPartition     = "kafka_dlt-original-partition"
	springOffset        = "kafka_dlt-original-offset"
	springTimestamp     = "kafka_dlt-original-timestamp"
	springTimestampType = "kafka_dlt-original-timestamp-type"
	springGroup         = "kafka_dlt-original-consumer-group"
	springFQCN          = "kafka_dlt-exception-fqcn"
	springCauseFQCN     = "kafka_dlt-exception-cause-fqcn"
	springMessage       = "kafka_dlt-exception-message"
	springStackTrace    = "kafka_dlt-exception-stacktrace"
	springKeyFQCN       = "kafka_dlt-key-exception-fqcn"
	springKeyMessage    = "kafka_dlt-key-exception-message"
	springKeyStackTrace = "kafka_dlt-key-exception-stacktrace"
)

// springWrappers are exceptions that Spring wraps the listener's own exception in: the error
// code is the cause's class then.
var springWrappers = map[string]bool{
	"org.springframework.kafka.listener.ListenerExecutionFailedException": true,
	"org.springframework.kafka.listener.TimestampedException":             true,
}

// parseSpring reads the headers of a Spring Kafka dead-letter record. When a record was
// dead-lettered more than once it carries the set more than once: the last occurrence of each
// header describes the latest failure, and the earlier exceptions become details.
func parseSpring(hs []avro.Header) (failureInfo, error) {
	h := newHeaders(redrive.SourceSpring, hs)
	fi := failureInfo{partition: redrive.UnknownPosition, offset: redrive.UnknownPosition}
	var err error
	var ok bool
	if fi.topic, ok, err = h.topic(springTopic); err != nil {
		return fi, err
	}
	if ok {
		p, err := h.bigEndian(springPartition, 4)
		if err != nil {
			return fi, err
		}
		if fi.offset, err = h.bigEndian(springOffset, 8); err != nil {
			return fi, err
		}
		fi.partition = int32(p)
	}
	if _, present := h.last(springTimestamp); present {
		ts, err := h.bigEndian(springTimestamp, 8)
		if err != nil {
			return fi, err
		}
		typ, err := h.optText(springTimestampType)
		if err != nil {
			return fi, err
		}
		fi.details = append(fi.details, fmt.Sprintf("original timestamp %s (%s)", time.UnixMilli(ts).UTC().Format(time.RFC3339Nano), orUnknown(typ)))
	}
	if fi.publisher, err = h.optText(springGroup); err != nil {
		return fi, err
	}
	texts := map[string]string{}
	for _, name := range []string{springFQCN, springCauseFQCN, springMessage, springStackTrace, springKeyFQCN, springKeyMessage, springKeyStackTrace} {
		if texts[name], err = h.optText(name); err != nil {
			return fi, err
		}
	}
	fi.exception, fi.message, fi.stackTrace = texts[springFQCN], texts[springMessage], texts[springStackTrace]
	if cause := texts[springCauseFQCN]; cause != "" && (fi.exception == "" || springWrappers[fi.exception]) {
		fi.details = append(fi.details, "exception "+fi.exception+" caused by "+cause)
		fi.exception = cause
	}
	if fi.exception == "" && texts[springKeyFQCN] != "" {
		fi.exception, fi.message, fi.stackTrace = texts[springKeyFQCN], texts[springKeyMessage], texts[springKeyStackTrace]
		fi.details = append(fi.details, "the key could not be deserialized")
	} else if texts[springKeyFQCN] != "" {
		fi.details = append(fi.details, "key exception "+texts[springKeyFQCN]+": "+texts[springKeyMessage])
	}
	// Earlier failures of a record dead-lettered more than once.
	fqcns, msgs, offsets := h.all(springFQCN), h.all(springMessage), h.all(springOffset)
	for i := 0; i < len(fqcns)-1; i++ {
		line := fmt.Sprintf("earlier failure %d of %d: %s", i+1, len(fqcns), safeText(fqcns[i]))
		if i < len(msgs)-1 && msgs[i] != nil {
			line += ": " + safeText(msgs[i])
		}
		if i < len(offsets)-1 && len(offsets[i]) == 8 {
			line += fmt.Sprintf(" (original offset %d)", int64(binary.BigEndian.Uint64(offsets[i])))
		}
		fi.details = append(fi.details, line)
	}
	return fi, nil
}

// Kafka Connect's dead-letter context headers (DeadLetterQueueReporter).
const (
	connectTopic      = "__connect.errors.topic"
	connectPartition  = "__connect.errors.partition"
	connectOffset     = "__connect.errors.offset"
	connectConnector  = "__connect.errors.connector.name"
	connectTask       = "__connect.errors.task.id"
	connectStage      = "__connect.errors.stage"
	connectClass      = "__connect.errors.class.name"
	connectException  = "__connect.errors.exception.class.name"
	connectMessage    = "__connect.errors.exception.message"
	connectStackTrace = "__connect.errors.exception.stacktrace"
)

// parseConnect reads the context headers of a Kafka Connect sink dead-letter record. A record
// without them (errors.deadletterqueue.context.headers.enable=false) has an unknown origin.
func parseConnect(hs []avro.Header) (failureInfo, error) {
	h := newHeaders(redrive.SourceConnect, hs)
	fi := failureInfo{partition: redrive.UnknownPosition, offset: redrive.UnknownPosition}
	var err error
	var ok bool
	if fi.topic, ok, err = h.topic(connectTopic); err != nil {
		return fi, err
	}
	if ok {
		p, err := h.decimal(connectPartition, 32)
		if err != nil {
			return fi, err
		}
		if fi.offset, err = h.decimal(connectOffset, 64); err != nil {
			return fi, err
		}
		fi.partition = int32(p)
	}
	texts := map[string]string{}
	for _, name := range []string{connectConnector, connectTask, connectStage, connectClass, connectException, connectMessage, connectStackTrace} {
		if texts[name], err = h.optText(name); err != nil {
			return fi, err
		}
	}
	fi.publisher = texts[connectConnector]
	fi.exception, fi.message, fi.stackTrace = texts[connectException], texts[connectMessage], texts[connectStackTrace]
	if texts[connectStage] != "" || texts[connectClass] != "" || texts[connectTask] != "" {
		fi.details = append(fi.details, fmt.Sprintf("connector %s task %s failed in stage %s (%s)",
			orUnknown(texts[connectConnector]), orUnknown(texts[connectTask]), orUnknown(texts[connectStage]), orUnknown(texts[connectClass])))
	}
	return fi, nil
}

// Kafka Streams' dead-letter headers (KIP-1034).
const (
	streamsException  = "__streams.errors.exception"
	streamsMessage    = "__streams.errors.message"
	streamsStackTrace = "__streams.errors.stacktrace"
	streamsTopic      = "__streams.errors.topic"
	streamsPartition  = "__streams.errors.partition"
	streamsOffset     = "__streams.errors.offset"
)

// parseStreams reads the headers of a Kafka Streams dead-letter record. Kafka Streams does not
// copy the original record's headers: they cannot be recovered.
func parseStreams(hs []avro.Header) (failureInfo, error) {
	h := newHeaders(redrive.SourceStreams, hs)
	fi := failureInfo{partition: redrive.UnknownPosition, offset: redrive.UnknownPosition}
	var err error
	var ok bool
	if fi.topic, ok, err = h.topic(streamsTopic); err != nil {
		return fi, err
	}
	if ok {
		p, err := h.decimal(streamsPartition, 32)
		if err != nil {
			return fi, err
		}
		if fi.offset, err = h.decimal(streamsOffset, 64); err != nil {
			return fi, err
		}
		fi.partition = int32(p)
	}
	exc, err := h.optText(streamsException)
	if err != nil {
		return fi, err
	}
	// The header holds the exception's toString(): "class: message", or the class alone.
	fi.exception, _, _ = strings.Cut(exc, ": ")
	fi.exception = strings.TrimSpace(fi.exception)
	if fi.message, err = h.optText(streamsMessage); err != nil {
		return fi, err
	}
	if fi.stackTrace, err = h.optText(streamsStackTrace); err != nil {
		return fi, err
	}
	return fi, nil
}
