// Package kafkalog forwards librdkafka's log lines to a *slog.Logger, so that every Kafka
// client of redrive logs through the logger its owner was given instead of printing to stderr.
package kafkalog

import (
	"context"
	"log/slog"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Enable is the client setting that makes librdkafka's logs readable with Forward.
const Enable = "go.logs.channel.enable"

// Level maps a syslog level of librdkafka (0 emergency … 7 debug) to a slog level.
func Level(syslog int) slog.Level {
	switch {
	case syslog <= 3:
		return slog.LevelError
	case syslog == 4:
		return slog.LevelWarn
	case syslog <= 6:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// Forward logs every event of logs to logger, with the client's name, until the channel is
// closed (confluent-kafka-go closes it when the client closes). The returned function waits for
// that. A nil channel (logs not enabled) forwards nothing.
func Forward(logger *slog.Logger, client string, logs chan kafka.LogEvent) (wait func()) {
	if logs == nil || logger == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range logs {
			logger.Log(context.Background(), Level(ev.Level), ev.Message, "librdkafka", client, "tag", ev.Tag)
		}
	}()
	return func() { <-done }
}
