package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/errorhandler/confluent"
)

// Kind says how the sample consumer treats an order.
type Kind string

// The kinds of order the generator produces.
const (
	// KindGood is handled without trouble.
	KindGood Kind = "good"
	// KindTemporary fails with a TEMPORARY error on first delivery and succeeds once redrive
	// resends it (the record then carries the redrive-origin header).
	KindTemporary Kind = "temporary"
	// KindPermanent always fails with a PERMANENT error: it waits for an operator.
	KindPermanent Kind = "permanent"
	// KindPanic makes the handler panic.
	KindPanic Kind = "panic"
	// KindUndecodable is not JSON at all: a decode failure.
	KindUndecodable Kind = "undecodable"
)

// Order is the sample consumer's message.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Amount   int    `json:"amount_cents"`
	Kind     Kind   `json:"kind"`
}

// Handled counts what the sample consumer did, by kind; resent temporary orders that succeed
// are counted as "recovered".
type Handled struct {
	Good, Recovered int64
}

// OrdersConfig configures the sample consumer.
type OrdersConfig struct {
	// Brokers is the bootstrap.servers list. Required.
	Brokers string
	// Topic is the orders topic. Defaults to "orders".
	Topic string
	// ErrorTopic is where MPFEs go. Required.
	ErrorTopic string
	// System and Service name the consumer in its MPFEs. Default to "shop" and "order-service".
	System, Service string
	// OnHandled is called after every successfully handled order, with recovered true for a
	// temporary order that succeeded after a resend. Optional.
	OnHandled func(o Order, recovered bool)
	// Logger receives the consumer's logs. Required.
	Logger *slog.Logger
	// Metrics is where the consumer's collectors are registered. Required.
	Metrics prometheus.Registerer
}

// NewOrdersConsumer returns the sample consumer: JSON orders, decode and process policies set to
// dead-letter, the message id, type and version taken from headers.
func NewOrdersConsumer(cfg OrdersConfig) (*confluent.Runner[[]byte, Order], error) {
	if cfg.Topic == "" {
		cfg.Topic = "orders"
	}
	if cfg.System == "" {
		cfg.System = "shop"
	}
	if cfg.Service == "" {
		cfg.Service = "order-service"
	}
	handler := errorhandler.HandlerFunc[[]byte, Order](func(ctx context.Context, rec errorhandler.Record[[]byte, Order]) error {
		o := rec.Value
		_, resent := rec.Message.HeaderValue(avro.HeaderOrigin)
		switch o.Kind {
		case KindTemporary:
			if !resent {
				return errorhandler.Temporary(fmt.Errorf("book order %s: payment service unavailable: %w", o.ID, errPaymentDown), "PAYMENT_UNAVAILABLE")
			}
		case KindPermanent:
			return errorhandler.Permanent(fmt.Errorf("book order %s: amount %d cents is negative", o.ID, o.Amount), "INVALID_AMOUNT")
		case KindPanic:
			var customers map[string]int
			customers[o.Customer]++ // a nil map: panics, as real bugs do
		}
		if cfg.OnHandled != nil {
			cfg.OnHandled(o, resent)
		}
		return nil
	})
	return confluent.New(errorhandler.Config[[]byte, Order]{
		GroupID:        "order-service",
		Topics:         []string{cfg.Topic},
		System:         cfg.System,
		Service:        cfg.Service,
		KeyDecoder:     errorhandler.Bytes(),
		ValueDecoder:   errorhandler.JSON[Order](),
		Handler:        handler,
		DecodePolicy:   errorhandler.DeadLetter,
		ProcessPolicy:  errorhandler.DeadLetter,
		FloodThreshold: -1, // the demo fails on purpose, often
		DeadLetter: errorhandler.DeadLetterConfig{
			ErrorTopic: cfg.ErrorTopic,
			Extractor: errorhandler.HeaderExtractor(errorhandler.HeaderNames{
				ID: "order-id", Type: "message-type", Version: "message-version",
			}),
		},
		CommitInterval: 500 * time.Millisecond,
		Logger:         cfg.Logger,
		Metrics:        cfg.Metrics,
	}, confluent.Settings{Brokers: cfg.Brokers, GroupInstanceID: "order-service-0"}) // static member: a restart resumes at once
}

var errPaymentDown = errors.New("connection refused")
