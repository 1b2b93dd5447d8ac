package intake

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// An intake cut off from the brokers reports not ready even when nothing arrives to read, and
// ready again once the brokers answer.
func TestReadyReflectsKafka(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.KafkaCheckInterval = 100 * time.Millisecond })
	e.start()
	e.waitFor("ready", func() bool { return e.intake.Ready() == nil })

	var cut atomic.Bool
	cut.Store(true)
	e.kafka.Fake().ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.kafka.Fake().KeepControl()
		if cut.Load() {
			return nil, errors.New("brokers cut off by the test"), true // closes the connection
		}
		return nil, nil, false
	})
	e.waitFor("not ready while Kafka is unreachable", func() bool {
		err := e.intake.Ready()
		return err != nil && strings.Contains(err.Error(), "Kafka")
	})
	cut.Store(false)
	e.waitFor("ready again", func() bool { return e.intake.Ready() == nil })
}
