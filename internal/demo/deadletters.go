package demo

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// DeadLettersConfig configures the feeder of foreign dead-letter topics.
type DeadLettersConfig struct {
	// Brokers is the bootstrap.servers list. Required.
	Brokers string
	// SpringTopic is the dead-letter topic a Spring Kafka consumer of SpringOriginalTopic writes.
	// Default to "payments.DLT" and "payments".
	SpringTopic, SpringOriginalTopic string
	// ConnectTopic is the dead-letter queue of a Kafka Connect sink connector that reads
	// ConnectOriginalTopic. Default to "jdbc-sink.dlq" and "invoices".
	ConnectTopic, ConnectOriginalTopic string
	// Rate is how many records per second the feeder writes, spread over both topics.
	// Defaults to 0.5.
	Rate float64
	// Limit stops the feeder after this many records; 0 means no limit.
	Limit int
	// Seed makes the mix reproducible. Defaults to the time.
	Seed uint64
	// Logger receives the feeder's logs. Required.
	Logger *slog.Logger
}

// DeadLetters writes records to a Spring Kafka dead-letter topic and a Kafka Connect dead-letter
// queue, with the headers as the Java code writes them, so that the demo shows failures of
// fleets that do not use redrive's middleware: Spring listener and deserialization failures (a
// few dead-lettered twice, a few tombstones), Connect converter and sink failures (some with a
// null exception message).
type DeadLetters struct {
	cfg  DeadLettersConfig
	feed *feed
	rnd  *rand.Rand
}

// NewDeadLetters returns a feeder; Run starts it.
func NewDeadLetters(cfg DeadLettersConfig) (*DeadLetters, error) {
	if cfg.SpringTopic == "" {
		cfg.SpringTopic = "payments.DLT"
	}
	if cfg.SpringOriginalTopic == "" {
		cfg.SpringOriginalTopic = "payments"
	}
	if cfg.ConnectTopic == "" {
		cfg.ConnectTopic = "jdbc-sink.dlq"
	}
	if cfg.ConnectOriginalTopic == "" {
		cfg.ConnectOriginalTopic = "invoices"
	}
	f, err := newFeed("dead-letter feeder", cfg.Brokers, cfg.Logger, &cfg.Rate, 0.5, &cfg.Seed, cfg.Limit)
	if err != nil {
		return nil, err
	}
	return &DeadLetters{cfg: cfg, feed: f, rnd: rand.New(rand.NewPCG(cfg.Seed, 11))}, nil
}

func be32(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
func be64(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// javaTrace returns a stack trace whose line numbers and lambda address vary from call to call,
// as they do between builds and JVMs, while the frames stay those of one bug.
func (d *DeadLetters) javaTrace(first string, frames ...string) string {
	s := first
	for _, f := range frames {
		parts := strings.Split(f, ".") // package.Class.method: the file is Class.java
		s += fmt.Sprintf("\n\tat %s(%s.java:%d)", f, parts[max(len(parts)-2, 0)], 20+d.rnd.IntN(200))
	}
	s += fmt.Sprintf("\n\tat org.springframework.kafka.listener.KafkaMessageListenerContainer$ListenerConsumer$$Lambda$%d/0x%016x.run(Unknown Source)", 100+d.rnd.IntN(900), d.rnd.Uint64()>>20)
	return s + "\n\tat java.base/java.lang.Thread.run(Thread.java:1583)"
}

// springSet returns the headers Spring's DeadLetterPublishingRecoverer appends for one failure.
func springSet(topic string, partition int32, offset int64, group, fqcn, cause, message, trace string) []kafka.Header {
	hs := []kafka.Header{
		{Key: "kafka_dlt-original-topic", Value: []byte(topic)},
		{Key: "kafka_dlt-original-partition", Value: be32(partition)},
		{Key: "kafka_dlt-original-offset", Value: be64(offset)},
		{Key: "kafka_dlt-original-timestamp", Value: be64(time.Now().Add(-time.Minute).UnixMilli())},
		{Key: "kafka_dlt-original-timestamp-type", Value: []byte("CreateTime")},
		{Key: "kafka_dlt-original-consumer-group", Value: []byte(group)},
		{Key: "kafka_dlt-exception-fqcn", Value: []byte(fqcn)},
	}
	if cause != "" {
		hs = append(hs, kafka.Header{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte(cause)})
	}
	return append(hs,
		kafka.Header{Key: "kafka_dlt-exception-message", Value: []byte(message)},
		kafka.Header{Key: "kafka_dlt-exception-stacktrace", Value: []byte(trace)})
}

// spring builds the n-th Spring dead-letter record.
func (d *DeadLetters) spring(n int) *kafka.Message {
	id := fmt.Sprintf("payment-%05d", n+1)
	value, _ := json.Marshal(map[string]any{"id": id, "account": fmt.Sprintf("CH%02d-%04d", d.rnd.IntN(99), d.rnd.IntN(9999)), "amount_cents": 100 + d.rnd.IntN(90000)})
	original := []kafka.Header{
		{Key: "__TypeId__", Value: []byte("com.shop.payments.PaymentRequested")},
		{Key: "traceparent", Value: []byte(fmt.Sprintf("00-%016x%016x-%016x-01", d.rnd.Uint64(), d.rnd.Uint64(), d.rnd.Uint64()))},
	}
	partition, offset := int32(d.rnd.IntN(3)), int64(1000+n*7)
	const group = "payment-service"
	listener := "org.springframework.kafka.listener.ListenerExecutionFailedException"
	frozen := func() []kafka.Header {
		return springSet(d.cfg.SpringOriginalTopic, partition, offset, group, listener, "java.lang.IllegalStateException",
			"Listener method 'onPayment' threw exception; account of "+id+" is frozen",
			d.javaTrace(listener+": Listener method 'onPayment' threw exception",
				"com.shop.payments.PaymentListener.onPayment", "com.shop.payments.AccountService.debit"))
	}
	key := []byte(id)
	var hs []kafka.Header
	switch {
	case n%11 == 5: // a tombstone of a compacted topic that the listener could not handle
		value = nil
		hs = append(original, springSet(d.cfg.SpringOriginalTopic, partition, offset, group, listener, "java.lang.NullPointerException",
			"Listener method 'onPayment' threw exception; Cannot invoke \"PaymentRequested.account()\" because \"event\" is null",
			d.javaTrace(listener, "com.shop.payments.PaymentListener.onPayment"))...)
	case n%5 == 2: // the value does not deserialize (ErrorHandlingDeserializer)
		value = append([]byte(`{"id": "`+id+`", "amount_cents": `), 0xC3, 0x28)
		hs = append(original, springSet(d.cfg.SpringOriginalTopic, partition, offset, group,
			"org.springframework.kafka.support.serializer.DeserializationException", "com.fasterxml.jackson.core.JsonParseException",
			"failed to deserialize; nested exception is com.fasterxml.jackson.core.JsonParseException: Invalid UTF-8 middle byte 0x28",
			d.javaTrace("org.springframework.kafka.support.serializer.DeserializationException: failed to deserialize",
				"org.springframework.kafka.support.serializer.ErrorHandlingDeserializer.deserialize"))...)
	case n%7 == 3: // dead-lettered, republished by hand, dead-lettered again
		hs = append(append(original, frozen()...), springSet(d.cfg.SpringOriginalTopic, partition, offset+500, group,
			"org.springframework.dao.QueryTimeoutException", "", "PreparedStatementCallback; SQL [update accounts ...]; query timed out",
			d.javaTrace("org.springframework.dao.QueryTimeoutException: query timed out", "com.shop.payments.AccountRepository.debit"))...)
	default:
		hs = append(original, frozen()...)
	}
	topic := d.cfg.SpringTopic
	return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Key: key, Value: value, Headers: hs}
}

// connect builds the n-th Connect dead-letter record.
func (d *DeadLetters) connect(n int) *kafka.Message {
	id := fmt.Sprintf("invoice-%05d", n+1)
	value, _ := json.Marshal(map[string]any{"invoice_id": id, "customer": "ada", "total": 100 + d.rnd.IntN(9000)})
	exc, stage, class := "org.apache.kafka.connect.errors.DataException", "VALUE_CONVERTER", "org.apache.kafka.connect.json.JsonConverter"
	msg := []byte("Converting byte[] to Kafka Connect data failed due to serialization error: ")
	trace := exc + ": Converting byte[] to Kafka Connect data failed\n\tat org.apache.kafka.connect.json.JsonConverter.toConnectData(JsonConverter.java:333)\n\tat org.apache.kafka.connect.runtime.WorkerSinkTask.convertValue(WorkerSinkTask.java:548)"
	if n%3 == 1 { // the sink refused the row; the driver gave no message
		value, _ = json.Marshal(map[string]any{"invoice_id": id, "customer": nil, "total": -1})
		exc, stage, class, msg = "org.postgresql.util.PSQLException", "TASK_PUT", "io.confluent.connect.jdbc.sink.JdbcSinkTask", nil
		trace = exc + "\n\tat org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2713)\n\tat io.confluent.connect.jdbc.sink.JdbcDbWriter.write(JdbcDbWriter.java:" + strconv.Itoa(70+d.rnd.IntN(10)) + ")"
	} else {
		value = value[:len(value)-3] // cut: not JSON
	}
	hs := []kafka.Header{
		{Key: "traceparent", Value: []byte(fmt.Sprintf("00-%016x%016x-%016x-01", d.rnd.Uint64(), d.rnd.Uint64(), d.rnd.Uint64()))},
		{Key: "__connect.errors.topic", Value: []byte(d.cfg.ConnectOriginalTopic)},
		{Key: "__connect.errors.partition", Value: []byte(strconv.Itoa(d.rnd.IntN(3)))},
		{Key: "__connect.errors.offset", Value: []byte(strconv.Itoa(5000 + n*3))},
		{Key: "__connect.errors.connector.name", Value: []byte("jdbc-sink-invoices")},
		{Key: "__connect.errors.task.id", Value: []byte(strconv.Itoa(d.rnd.IntN(2)))},
		{Key: "__connect.errors.stage", Value: []byte(stage)},
		{Key: "__connect.errors.class.name", Value: []byte(class)},
		{Key: "__connect.errors.exception.class.name", Value: []byte(exc)},
		{Key: "__connect.errors.exception.message", Value: msg},
		{Key: "__connect.errors.exception.stacktrace", Value: []byte(trace)},
	}
	topic := d.cfg.ConnectTopic
	return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Key: []byte(id), Value: value, Headers: hs}
}

// Run writes records, alternating the Spring topic and the Connect queue, until ctx ends or
// Limit is reached, then flushes and closes the producer.
func (d *DeadLetters) Run(ctx context.Context) error {
	return d.feed.run(ctx, func(n int) *kafka.Message {
		msg := d.spring(n / 2)
		if n%2 == 1 {
			msg = d.connect(n / 2)
		}
		return msg
	}, nil)
}
