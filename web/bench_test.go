package web

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/internal/testkit/storekit"
	"github.com/redrive/redrive/operator"
)

// benchHandler is the UI over the operator core on a fresh database holding n failures whose
// values are size random bytes, with a trusted proxy's viewer at httptest's address; it
// returns the failures' ids, oldest first.
func benchHandler(b *testing.B, n, size int) (http.Handler, []uuid.UUID) {
	b.Helper()
	pool := testkit.Postgres(b)
	st := storekit.New(b, pool)
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Now().Add(-time.Hour)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		value := make([]byte, size)
		for j := range value {
			value[j] = byte(rnd.IntN(256))
		}
		ids[i] = testkit.InsertFailure(b, pool, testkit.FailureRow{State: redrive.StateRetryPending, Temporality: avro.Temporary,
			Topic: "orders", PublisherService: "billing", MessageType: "OrderPlaced", Value: value, Key: []byte("key"),
			HeaderNames: []string{"a"}, HeaderValues: [][]byte{[]byte("b")}, CreatedAt: base.Add(time.Duration(i) * time.Second)})
	}
	core, err := operator.New(operator.Config{Store: st, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		ProxyDefaultRole: auth.RoleViewer})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{Core: core, Auth: a, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return h, ids
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
	h, ids := benchHandler(b, 1, 64<<10)
	benchGet(b, h, "/failures/"+ids[0].String())
}

// BenchmarkFailurePageSmall renders the detail of a failure with a 1 KiB value.
func BenchmarkFailurePageSmall(b *testing.B) {
	h, ids := benchHandler(b, 1, 1<<10)
	benchGet(b, h, "/failures/"+ids[0].String())
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
