package kafkalog_test

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/internal/kafkalog"
)

func TestCloseConsumer(t *testing.T) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": "127.0.0.1:1", "group.id": "close-test", "log_level": 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := kafkalog.CloseConsumer(c, 30*time.Second); err != nil {
		t.Fatalf("close: %v", err)
	}
}
