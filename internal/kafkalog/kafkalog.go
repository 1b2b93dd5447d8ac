// Package kafkalog forwards librdkafka's log lines to a *slog.Logger, so that every Kafka
// client of redrive logs through the logger its owner was given instead of printing to stderr.
package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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

// ErrCloseTimeout means a consumer did not finish closing in time. librdkafka can hang in
// Close while it hands a pending assignment to the application (confluentinc/librdkafka#4884);
// the caller goes on without it: offsets not committed are read again, which the intake
// tolerates, and the process's exit ends the client.
var ErrCloseTimeout = errors.New("the consumer did not finish closing")

// CloseConsumer closes c, waiting at most timeout; then it returns ErrCloseTimeout and leaves
// the close running.
func CloseConsumer(c *kafka.Consumer, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%w in %s", ErrCloseTimeout, timeout)
	}
}
