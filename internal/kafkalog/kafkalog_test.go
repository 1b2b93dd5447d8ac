package kafkalog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func TestForward(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	logs := make(chan kafka.LogEvent, 3)
	wait := Forward(logger, "producer", logs)
	logs <- kafka.LogEvent{Level: 3, Tag: "FAIL", Message: "broker down"}
	logs <- kafka.LogEvent{Level: 4, Tag: "WARN", Message: "slow"}
	logs <- kafka.LogEvent{Level: 7, Tag: "DBG", Message: "detail"}
	close(logs)
	wait()
	out := buf.String()
	for _, want := range []string{"level=ERROR msg=\"broker down\" librdkafka=producer tag=FAIL", "level=WARN msg=slow", "level=DEBUG msg=detail"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	Forward(logger, "x", nil)() // nothing to forward, returns at once
}

func TestLevel(t *testing.T) {
	for syslog, want := range map[int]slog.Level{0: slog.LevelError, 3: slog.LevelError, 4: slog.LevelWarn, 5: slog.LevelInfo, 6: slog.LevelInfo, 7: slog.LevelDebug} {
		if got := Level(syslog); got != want {
			t.Errorf("Level(%d) = %v, want %v", syslog, got, want)
		}
	}
}
