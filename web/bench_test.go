package web

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// benchHandler is the UI on a fake backend holding n failures whose values have size bytes.
func benchHandler(b *testing.B, n, size int) (http.Handler, *fakeBackend) {
	b.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fb := &fakeBackend{now: now}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		value := make([]byte, size)
		for j := range value {
			value[j] = byte(rnd.IntN(256))
		}
		next := now.Add(time.Minute)
		fb.add(&FailureDetail{
			FailureRow: FailureRow{ID: uuid.New(), ReceivedAt: now.Add(time.Duration(i) * time.Second), Topic: "orders", Offset: int64(i),
				PublisherService: "billing", MessageType: "OrderPlaced", ErrorCode: "DESERIALIZATION_FAILED",
				ErrorMessage: "cannot decode", Temporality: avro.Temporary, State: store.StateRetryPending, Attempt: 1, NextAttemptAt: &next},
			Value: value, Key: []byte("key"), Headers: []avro.Header{{Name: "a", Value: []byte("b")}},
			StackTrace: "java.lang.IllegalStateException\n\tat x", CausingMessage: "c", FailedAt: now,
		})
	}
	h, err := New(Config{Backend: fb, Auth: fakeAuth{proxy: true}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	return h, fb
}

func benchGet(b *testing.B, h http.Handler, path string) {
	b.Helper()
	b.ReportAllocs()
	var size int
	for b.Loop() {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("X-Forwarded-User", "bench")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d", path, w.Code)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
}

// BenchmarkFailurePage renders the detail of a failure with a 64 KiB binary value: hex and
// text views of every byte.
func BenchmarkFailurePage(b *testing.B) {
	h, fb := benchHandler(b, 1, 64<<10)
	benchGet(b, h, "/failures/"+fb.failures[0].ID.String())
}

// BenchmarkFailurePageSmall renders the detail of a failure with a 1 KiB value.
func BenchmarkFailurePageSmall(b *testing.B) {
	h, fb := benchHandler(b, 1, 1<<10)
	benchGet(b, h, "/failures/"+fb.failures[0].ID.String())
}

// BenchmarkFailuresPage renders a list page of 50 rows.
func BenchmarkFailuresPage(b *testing.B) {
	h, _ := benchHandler(b, 50, 16)
	benchGet(b, h, "/failures?state=RETRY_PENDING&topic=orders")
}

// BenchmarkOverviewPage renders the overview with its chart.
func BenchmarkOverviewPage(b *testing.B) {
	h, _ := benchHandler(b, 50, 16)
	benchGet(b, h, "/")
}
