//go:build cgo

package main

import (
	"fmt"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
)

func init() { clients["confluent"] = newConfluentRunner }

func newConfluentRunner(cfg errorhandler.Config[[]byte, Order], brokers string, cs clientSettings) (runner, error) {
	cc := kafka.ConfigMap{"log_level": 3}
	if cs.sessionTimeout > 0 {
		cc["session.timeout.ms"] = int(cs.sessionTimeout.Milliseconds())
	}
	for _, kv := range strings.Split(cs.consumerConfig, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid -consumer-config entry %q: want key=value", kv)
		}
		cc[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return confluent.New(cfg, confluent.Settings{Brokers: brokers, GroupInstanceID: cs.instanceID, ConsumerConfig: cc, ProducerConfig: kafka.ConfigMap{"log_level": 3}})
}
