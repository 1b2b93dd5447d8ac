package intake

import (
	"testing"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// BenchmarkForeignIncoming measures the mapping of one Spring dead-letter record (header
// parsing, stack-trace hash, event) and its validation, as the intake's poller does it.
func BenchmarkForeignIncoming(b *testing.B) {
	src := Source{Format: redrive.SourceSpring, Topic: "orders.DLT", hashes: &traceHashes{}}
	f := springFailure{topic: "orders", partition: 3, offset: 77, timestamp: 1, group: "order-service",
		fqcn: "org.springframework.kafka.listener.ListenerExecutionFailedException", causeFQCN: "java.lang.IllegalStateException",
		message: "could not process the order", trace: javaTrace}
	hs := append([]avro.Header{{Name: "traceparent", Value: []byte("00-1")}, {Name: "content-type", Value: []byte("application/avro")}}, f.headers()...)
	value := make([]byte, 512)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		in, err := src.foreignIncoming(&dltRecord{Topic: "orders.DLT", Partition: 1, Offset: int64(i), Key: []byte("k"), Value: value, Headers: hs}, now)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := store.Prepare(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStackTraceHash measures the normalisation and hash of a 10-line Java stack trace.
func BenchmarkStackTraceHash(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = stackTraceHash(javaTrace)
	}
}
