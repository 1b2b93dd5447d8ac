package intake

import (
	"errors"
	"strings"
	"testing"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func TestParseSource(t *testing.T) {
	t.Parallel()
	good := []struct {
		spec string
		want Source
	}{
		{"mpfe:errors", Source{Format: redrive.SourceMPFE, Topic: "errors"}},
		{"spring:orders.DLT", Source{Format: redrive.SourceSpring, Topic: "orders.DLT"}},
		{" SPRING:orders-dlt?temporality=temporary&publisher=orders-service ",
			Source{Format: redrive.SourceSpring, Topic: "orders-dlt", Temporality: avro.Temporary, PublisherService: "orders-service"}},
		{"connect:sink.dlq=payments", Source{Format: redrive.SourceConnect, Topic: "sink.dlq", OriginalTopic: "payments"}},
		{"streams:app-dlq?code=STREAMS_FAILED&system=shop",
			Source{Format: redrive.SourceStreams, Topic: "app-dlq", ErrorCode: "STREAMS_FAILED", PublisherSystem: "shop"}},
		{"raw:orders.DLQ=orders?temporality=UNKNOWN", Source{Format: redrive.SourceRaw, Topic: "orders.DLQ", OriginalTopic: "orders", Temporality: avro.Unknown}},
	}
	for _, tt := range good {
		got, err := ParseSource(tt.spec)
		if err != nil {
			t.Errorf("ParseSource(%q): %v", tt.spec, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseSource(%q) = %+v, want %+v", tt.spec, got, tt.want)
		}
		again, err := ParseSource(got.String())
		if err != nil || again != got {
			t.Errorf("ParseSource(String()) of %q = %+v, %v", tt.spec, again, err)
		}
	}
	bad := map[string]string{
		"orders.DLT":                            "want FORMAT:TOPIC",
		"kafka:orders":                          `format "kafka"`,
		"spring:":                               "topic is empty",
		"spring:orders DLT":                     "has the character",
		"raw:orders.DLQ":                        "a raw source needs its original topic",
		"raw:orders.DLQ=orders.DLQ":             "the original topic is the source topic",
		"mpfe:errors=orders":                    "an mpfe source takes no original topic",
		"mpfe:errors?temporality=PERMANENT":     "an mpfe source takes no original topic",
		"spring:x?temporality=SOMETIMES":        `temporality "SOMETIMES"`,
		"spring:x?colour=blue":                  `unknown option "colour"`,
		"spring:x?publisher=":                   `option "publisher" is empty`,
		"spring:x?publisher=a&publisher=b":      `option "publisher" given 2 times`,
		"connect:x=" + strings.Repeat("o", 250): "original topic is 250 characters",
	}
	for spec, want := range bad {
		_, err := ParseSource(spec)
		if !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strings.TrimSpace(spec)) {
			t.Errorf("ParseSource(%q) = %v, want an error naming the entry with %q", spec, err, want)
		}
	}
}

func TestParseSources(t *testing.T) {
	t.Parallel()
	got, err := ParseSources("spring:a.DLT, connect:b.dlq=b\nraw:c.DLQ=c,,\n")
	if err != nil || len(got) != 3 || got[1].OriginalTopic != "b" || got[2].Format != redrive.SourceRaw {
		t.Fatalf("ParseSources = %+v, %v", got, err)
	}
	_, err = ParseSources("spring:a.DLT,raw:b,kafka:c")
	if err == nil || !strings.Contains(err.Error(), `"raw:b"`) || !strings.Contains(err.Error(), `"kafka:c"`) {
		t.Errorf("ParseSources with two bad entries = %v, want both named", err)
	}
}

func TestConfigValidatesSources(t *testing.T) {
	t.Parallel()
	base := Config{Store: &store.Store{}, NextAttempt: next, Bootstrap: "x", DeadLetterTopic: "own.DLT"}
	for name, tt := range map[string]struct {
		topic   string
		sources []Source
		want    string
	}{
		"none":           {"", nil, "Topic or Sources is required"},
		"twice":          {"errors", []Source{{Format: redrive.SourceMPFE, Topic: "errors"}}, `topic "errors" is read by two sources`},
		"dead-letter":    {"", []Source{{Format: redrive.SourceSpring, Topic: "own.DLT"}}, "is a source topic"},
		"back to dlt":    {"", []Source{{Format: redrive.SourceRaw, Topic: "r.DLQ", OriginalTopic: "own.DLT"}}, "sends its records back"},
		"invalid source": {"", []Source{{Format: redrive.SourceRaw, Topic: "r.DLQ"}}, "a raw source needs its original topic"},
	} {
		c := base
		c.Topic, c.Sources = tt.topic, tt.sources
		c, _ = c.withDefaults()
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: validate = %v, want %q", name, err, tt.want)
		}
	}
	c := base
	c.Sources = []Source{{Format: redrive.SourceSpring, Topic: "a.DLT"}, {Format: redrive.SourceRaw, Topic: "b.DLQ", OriginalTopic: "b"}}
	c, _ = c.withDefaults()
	if err := c.validate(); err != nil {
		t.Errorf("valid sources: %v", err)
	}
}
