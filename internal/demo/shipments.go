package demo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The Protobuf schemas of the demo's shipments: shipment.proto imports address.proto, which
// the registry holds as a subject of its own (a schema reference), and the well-known
// Timestamp; Shipment nests Parcel.
const (
	shipmentProto = `syntax = "proto3";

package shop.shipping;

import "shop/address.proto";
import "google/protobuf/timestamp.proto";

message Shipment {
  message Parcel {
    string barcode = 1;
    int32 weight_grams = 2;
  }
  string shipment_id = 1;
  string order_id = 2;
  shop.common.Address destination = 3;
  repeated Parcel parcels = 4;
  google.protobuf.Timestamp dispatched_at = 5;
  string carrier = 6;
}

message ShipmentCancelled {
  string shipment_id = 1;
  string reason = 2;
}
`
	addressProto = `syntax = "proto3";

package shop.common;

message Address {
  string name = 1;
  string street = 2;
  string city = 3;
  string country = 4;
}
`
	addressFile = "shop/address.proto"
)

// ShipmentsConfig configures the feeder of the Protobuf shipments' dead-letter topic.
type ShipmentsConfig struct {
	// Brokers is the bootstrap.servers list. Required.
	Brokers string
	// Registry is the schema registry the shipments' schemas are registered in, and which the
	// service reads them from. Required.
	Registry schemaregistry.Client
	// Topic is the Spring Kafka dead-letter topic of OriginalTopic. Default to "shipments.DLT"
	// and "shipments".
	Topic, OriginalTopic string
	// Rate is how many records per second the feeder writes. Defaults to 0.3.
	Rate float64
	// Limit stops the feeder after this many records; 0 means no limit.
	Limit int
	// Seed makes the mix reproducible. Defaults to the time.
	Seed uint64
	// Logger receives the feeder's logs. Required.
	Logger *slog.Logger
}

// Shipments writes Protobuf shipments in the Confluent wire format (schema id, message
// indexes) to a Spring Kafka dead-letter topic, as a Spring consumer of a Protobuf topic does
// when its listener fails, so that the demo shows Protobuf payloads decoded with their writer
// schema from the registry.
type Shipments struct {
	cfg       ShipmentsConfig
	feed      *feed
	rnd       *rand.Rand
	id        int
	shipment  protoreflect.MessageDescriptor
	cancelled protoreflect.MessageDescriptor
}

// NewShipments registers the shipments' schemas and returns a feeder; Run starts it.
func NewShipments(cfg ShipmentsConfig) (*Shipments, error) {
	if cfg.Registry == nil {
		return nil, errors.New("invalid config: Registry is nil")
	}
	if cfg.Topic == "" {
		cfg.Topic = "shipments.DLT"
	}
	if cfg.OriginalTopic == "" {
		cfg.OriginalTopic = "shipments"
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) {
			switch path {
			case "shop/shipment.proto":
				return io.NopCloser(strings.NewReader(shipmentProto)), nil
			case addressFile:
				return io.NopCloser(strings.NewReader(addressProto)), nil
			}
			return nil, fmt.Errorf("no file %s", path)
		},
	})}
	files, err := c.Compile(context.Background(), "shop/shipment.proto")
	if err != nil {
		return nil, fmt.Errorf("shipment schema: %w", err)
	}
	if _, err := cfg.Registry.Register(addressFile, schemaregistry.SchemaInfo{Schema: addressProto, SchemaType: "PROTOBUF"}, false); err != nil {
		return nil, fmt.Errorf("register %s: %w", addressFile, err)
	}
	version, err := cfg.Registry.GetLatestSchemaMetadata(addressFile)
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", addressFile, err)
	}
	id, err := cfg.Registry.Register(cfg.OriginalTopic+"-value", schemaregistry.SchemaInfo{Schema: shipmentProto, SchemaType: "PROTOBUF",
		References: []schemaregistry.Reference{{Name: addressFile, Subject: addressFile, Version: version.Version}}}, false)
	if err != nil {
		return nil, fmt.Errorf("register the shipment schema: %w", err)
	}
	f, err := newFeed("shipments feeder", cfg.Brokers, cfg.Logger, &cfg.Rate, 0.3, &cfg.Seed, cfg.Limit)
	if err != nil {
		return nil, err
	}
	msgs := files[0].Messages()
	return &Shipments{cfg: cfg, feed: f, rnd: rand.New(rand.NewPCG(cfg.Seed, 13)), id: id,
		shipment: msgs.ByName("Shipment"), cancelled: msgs.ByName("ShipmentCancelled")}, nil
}

// frame returns the Confluent wire format of m: 0x00, the schema id, the message indexes.
func (s *Shipments) frame(indexes []int, m proto.Message) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(s.id))
	if len(indexes) == 1 && indexes[0] == 0 {
		b = append(b, 0)
	} else {
		b = binary.AppendVarint(b, int64(len(indexes)))
		for _, ix := range indexes {
			b = binary.AppendVarint(b, int64(ix))
		}
	}
	b, _ = proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, m)
	return b
}

var cities = []struct{ city, country string }{{"Bern", "CH"}, {"Lyon", "FR"}, {"Graz", "AT"}, {"Turin", "IT"}}

// record builds the n-th dead-letter record.
func (s *Shipments) record(n int) *kafka.Message {
	id := fmt.Sprintf("shipment-%05d", n+1)
	var value []byte
	fqcn, cause := "org.springframework.kafka.listener.ListenerExecutionFailedException", "com.shop.shipping.CarrierRejectedException"
	message := "Listener method 'onShipment' threw exception; carrier rejected " + id + ": destination street is empty"
	if n%4 == 3 { // a cancellation the listener does not expect
		m := dynamicpb.NewMessage(s.cancelled)
		m.Set(s.cancelled.Fields().ByName("shipment_id"), protoreflect.ValueOfString(id))
		m.Set(s.cancelled.Fields().ByName("reason"), protoreflect.ValueOfString("customer request"))
		value = s.frame([]int{1}, m)
		cause, message = "java.lang.ClassCastException", "Listener method 'onShipment' threw exception; class com.shop.shipping.ShipmentCancelled cannot be cast to class com.shop.shipping.Shipment"
	} else {
		md := s.shipment
		m := dynamicpb.NewMessage(md)
		f := md.Fields()
		m.Set(f.ByName("shipment_id"), protoreflect.ValueOfString(id))
		m.Set(f.ByName("order_id"), protoreflect.ValueOfString(fmt.Sprintf("order-%05d", s.rnd.IntN(99999))))
		m.Set(f.ByName("carrier"), protoreflect.ValueOfString([]string{"swisspost", "dhl", "ups"}[s.rnd.IntN(3)]))
		ad := f.ByName("destination").Message()
		addr := dynamicpb.NewMessage(ad)
		c := cities[s.rnd.IntN(len(cities))]
		addr.Set(ad.Fields().ByName("name"), protoreflect.ValueOfString("Ada Lovelace"))
		addr.Set(ad.Fields().ByName("city"), protoreflect.ValueOfString(c.city))
		addr.Set(ad.Fields().ByName("country"), protoreflect.ValueOfString(c.country))
		m.Set(f.ByName("destination"), protoreflect.ValueOfMessage(addr))
		pd := f.ByName("parcels").Message()
		list := m.Mutable(f.ByName("parcels")).List()
		for i := 0; i <= s.rnd.IntN(2); i++ {
			p := dynamicpb.NewMessage(pd)
			p.Set(pd.Fields().ByName("barcode"), protoreflect.ValueOfString(fmt.Sprintf("99%010d", s.rnd.Int64N(1e10))))
			p.Set(pd.Fields().ByName("weight_grams"), protoreflect.ValueOfInt32(int32(200+s.rnd.IntN(5000))))
			list.Append(protoreflect.ValueOfMessage(p))
		}
		ts := timestamppb.New(time.Now().Add(-time.Duration(s.rnd.IntN(3600)) * time.Second).Truncate(time.Millisecond))
		tsd := f.ByName("dispatched_at").Message()
		tm := dynamicpb.NewMessage(tsd)
		tm.Set(tsd.Fields().ByName("seconds"), protoreflect.ValueOfInt64(ts.Seconds))
		tm.Set(tsd.Fields().ByName("nanos"), protoreflect.ValueOfInt32(ts.Nanos))
		m.Set(f.ByName("dispatched_at"), protoreflect.ValueOfMessage(tm))
		value = s.frame([]int{0}, m)
	}
	partition, offset := int32(s.rnd.IntN(3)), int64(300+n*5)
	hs := append([]kafka.Header{{Key: "traceparent", Value: []byte(fmt.Sprintf("00-%016x%016x-%016x-01", s.rnd.Uint64(), s.rnd.Uint64(), s.rnd.Uint64()))}},
		springSet(s.cfg.OriginalTopic, partition, offset, "shipping-service", fqcn, cause, message,
			fqcn+": "+message+"\n\tat com.shop.shipping.ShipmentListener.onShipment(ShipmentListener.java:57)\n\tat java.base/java.lang.Thread.run(Thread.java:1583)")...)
	topic := s.cfg.Topic
	return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Key: []byte(id), Value: value, Headers: hs}
}

// Run writes records until ctx ends or Limit is reached, then flushes and closes the producer.
func (s *Shipments) Run(ctx context.Context) error {
	return s.feed.run(ctx, s.record, nil)
}
