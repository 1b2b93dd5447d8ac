package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/franz"
)

// runner is what both adapters' Runners offer the example.
type runner interface {
	Run(ctx context.Context) error
	HealthHandler() http.Handler
}

// clientSettings are the client flags.
type clientSettings struct {
	instanceID     string
	sessionTimeout time.Duration
	consumerConfig string
}

// newRunnerFunc builds a runner of one client.
type newRunnerFunc func(cfg errorhandler.Config[[]byte, Order], brokers string, cs clientSettings) (runner, error)

// clients are the clients this build offers; confluent needs cgo (client_confluent.go).
var clients = map[string]newRunnerFunc{"franz": newFranzRunner}

func clientNames() []string {
	var names []string
	for name := range clients {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func newFranzRunner(cfg errorhandler.Config[[]byte, Order], brokers string, cs clientSettings) (runner, error) {
	if cs.consumerConfig != "" {
		return nil, errors.New("-consumer-config takes librdkafka properties: use it with -client confluent")
	}
	var opts []kgo.Opt
	if cs.sessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cs.sessionTimeout))
	}
	return franz.New(cfg, franz.Settings{Brokers: strings.Split(brokers, ","), GroupInstanceID: cs.instanceID, ConsumerOpts: opts})
}
