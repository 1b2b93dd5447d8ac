package confluent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/kafkalog"
)

// Settings are the confluent-kafka-go (librdkafka) settings of a Runner or a DeadLetterer.
type Settings struct {
	// Brokers is the bootstrap.servers list. Required.
	Brokers string
	// GroupInstanceID, when set, makes the consumer a static member of its group (KIP-345,
	// group.instance.id): librdkafka sends no LeaveGroup for a static member when it closes,
	// and a restart with the same id within session.timeout.ms gets its partitions back at
	// once, without a rebalance, where a dynamic member's partitions stall until the session
	// timeout removes the dead member (45s by default). Each member of the group needs its own
	// id that stays the same across its restarts, e.g. a StatefulSet pod's name (see
	// docs/errorhandler.md). Empty: dynamic membership.
	GroupInstanceID string
	// ConsumerConfig overrides the consumer defaults (auto.offset.reset=earliest), e.g.
	// session.timeout.ms. Commits and offset stores belong to the runner: enable.auto.commit
	// and enable.auto.offset.store cannot be set; group.instance.id is GroupInstanceID.
	ConsumerConfig kafka.ConfigMap
	// DeadLetterBrokers is the bootstrap.servers list of the cluster holding the error topic.
	// Defaults to Brokers.
	DeadLetterBrokers string
	// ProducerConfig overrides the MPFE producer defaults: acks=all, enable.idempotence=true,
	// linger.ms=20, compression.type=lz4, message.timeout.ms=30000 and message.max.bytes=16 MiB
	// + 64 KiB. The linger and the compression make fewer, larger produce requests when many
	// records fail at once, which costs the brokers far less per MPFE; an MPFE's record is
	// committed only after its acknowledgement anyway, so the linger only delays a commit that
	// waits for the commit interval. acks and enable.idempotence cannot be weakened.
	ProducerConfig kafka.ConfigMap
}

func (s *Settings) validate(consumer bool) error {
	var errs []error
	if s.Brokers == "" && (consumer || s.DeadLetterBrokers == "") {
		errs = append(errs, errors.New("Brokers is empty"))
	}
	for k, v := range s.ProducerConfig {
		switch k {
		case "acks", "request.required.acks":
			if s := strings.TrimSpace(fmt.Sprint(v)); s != "all" && s != "-1" {
				errs = append(errs, fmt.Errorf("ProducerConfig %s=%v: MPFEs need acks=all", k, v))
			}
		case "enable.idempotence":
			if b, ok := v.(bool); !ok || !b {
				if s := fmt.Sprint(v); s != "true" {
					errs = append(errs, fmt.Errorf("ProducerConfig %s=%v: MPFEs need an idempotent producer", k, v))
				}
			}
		case "go.delivery.reports", "go.events.channel.enable":
			errs = append(errs, fmt.Errorf("ProducerConfig %s cannot be set: delivery reports are how MPFEs are tracked", k))
		}
	}
	for k := range s.ConsumerConfig {
		switch k {
		case "enable.auto.commit", "enable.auto.offset.store", "go.events.channel.enable", "go.application.rebalance.enable":
			errs = append(errs, fmt.Errorf("ConsumerConfig %s cannot be set: commits and rebalances belong to the runner", k))
		case "group.instance.id":
			if s.GroupInstanceID != "" {
				errs = append(errs, errors.New("ConsumerConfig group.instance.id and GroupInstanceID are both set: use GroupInstanceID"))
			}
		}
	}
	if s.GroupInstanceID != strings.TrimSpace(s.GroupInstanceID) {
		errs = append(errs, fmt.Errorf("GroupInstanceID %q has leading or trailing spaces", s.GroupInstanceID))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid settings: %w", errors.Join(errs...))
	}
	if s.DeadLetterBrokers == "" {
		s.DeadLetterBrokers = s.Brokers
	}
	return nil
}

func (s *Settings) consumerConfig(group string) kafka.ConfigMap {
	cfg := kafka.ConfigMap{
		"bootstrap.servers": s.Brokers,
		"group.id":          group,
		"client.id":         "redrive-errorhandler",
		"auto.offset.reset": "earliest",
		kafkalog.Enable:     true,
	}
	for k, v := range s.ConsumerConfig {
		cfg[k] = v
	}
	if s.GroupInstanceID != "" {
		cfg["group.instance.id"] = s.GroupInstanceID
	}
	cfg["enable.auto.commit"] = false
	cfg["enable.auto.offset.store"] = false
	return cfg
}

func (s *Settings) producerConfig() kafka.ConfigMap {
	cfg := kafka.ConfigMap{
		"bootstrap.servers":         s.DeadLetterBrokers,
		"client.id":                 "redrive-errorhandler",
		"acks":                      "all",
		"enable.idempotence":        true,
		"linger.ms":                 20,
		"compression.type":          "lz4",
		"message.timeout.ms":        30000,
		"message.max.bytes":         avro.DefaultMaxSize + 64<<10,
		"go.delivery.report.fields": "none",
		kafkalog.Enable:             true,
	}
	for k, v := range s.ProducerConfig {
		cfg[k] = v
	}
	return cfg
}
