package web

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

func TestParseFilterRoundTrip(t *testing.T) {
	t.Parallel()
	q := "state=PERMANENT&state=RETRY_PENDING&temporality=UNKNOWN&topic=orders&publisher_service=billing" +
		"&message_type=OrderPlaced&error_code=BOOM&group_id=7&q=time+out&key=k%201&created_from=2026-11-30T10:00" +
		"&created_to=2026-12-01T00:00:00Z"
	v, _ := url.ParseQuery(q)
	f, err := ParseFilter(v)
	if err != nil {
		t.Fatal(err)
	}
	want := Filter{
		States: []store.State{store.StatePermanent, store.StateRetryPending}, Temporalities: []avro.Temporality{avro.Unknown},
		Topic: "orders", PublisherService: "billing", MessageType: "OrderPlaced", ErrorCode: "BOOM", GroupID: 7,
		Search: "time out", Key: "k 1",
		From: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("parsed %+v\nwant   %+v", f, want)
	}
	again, err := ParseFilter(f.Values())
	if err != nil || !reflect.DeepEqual(again, f) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	if !(Filter{}).IsZero() || f.IsZero() {
		t.Error("IsZero")
	}
	for _, bad := range []string{"state=DONE", "temporality=SOMETIMES", "group_id=-1", "group_id=x",
		"created_from=yesterday", "created_from=2026-12-01T00:00&created_to=2026-11-30T00:00", "topic=%00",
		"topic=" + strings.Repeat("x", 1001)} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParseFilter(v); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/failures?x=1": "/failures?x=1", "": "/", "//evil.example": "/", "/\\evil.example": "/",
		"https://evil.example/": "/", "failures": "/", "/a\r\nSet-Cookie: x": "/", "javascript:alert(1)": "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChart(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	buckets := fillBuckets([]Bucket{{Start: since.Add(2 * time.Hour), Count: 9}, {Start: since.Add(-time.Hour), Count: 100}},
		since, time.Hour, 4)
	c := newChart(buckets, time.Hour)
	if len(c.Bars) != 4 || c.Total != 9 || c.Bars[2].Count != 9 || c.Bars[0].H != 0 {
		t.Fatalf("chart = %+v", c)
	}
	if top := c.YTicks[len(c.YTicks)-1].Label; top != "12" {
		t.Errorf("scale top %s, want 12", top)
	}
	if c.Bars[2].Y+c.Bars[2].H != chartBottom || c.Bars[2].H < 1 {
		t.Errorf("bar %+v does not stand on the axis", c.Bars[2])
	}
	for v, want := range map[int64]int64{0: 4, 4: 4, 5: 8, 9: 12, 13: 20, 61: 80, 81: 120, 999: 1200} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", v, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 12 * time.Minute: "12m", time.Hour: "1h", 200 * time.Minute: "3h 20m",
		24 * time.Hour: "1d", 98 * time.Hour: "4d 2h", -90 * time.Second: "in 1m",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	if err == nil || !strings.Contains(err.Error(), "invalid config: Backend is required") || !strings.Contains(err.Error(), "Auth is required") {
		t.Fatalf("empty config: %v", err)
	}
	_, err = New(Config{Backend: &fakeBackend{}, Auth: fakeAuth{}, SessionKey: []byte("short"), PageSize: 501, Schemas: []string{"{"}})
	if err == nil || !strings.Contains(err.Error(), "SessionKey") || !strings.Contains(err.Error(), "PageSize") {
		t.Fatalf("bad config: %v", err)
	}
	if _, err := New(Config{Backend: &fakeBackend{}, Auth: fakeAuth{}, Schemas: []string{"{"}}); err == nil || !strings.Contains(err.Error(), "Schemas") {
		t.Fatalf("bad schema: %v", err)
	}
}

func TestAPIAuthenticator(t *testing.T) {
	t.Parallel()
	tokens, err := api.ParseTokens("ops:operator:operator-secret-0001,view:viewer:viewer-secret-00001")
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.NewAuthenticator(api.AuthConfig{
		Tokens: tokens, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		ProxyRoles: map[string]api.Role{"sre": api.RoleAdmin},
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := APIAuthenticator(a)
	ctx := context.Background()
	if p, err := auth.Token(ctx, "operator-secret-0001"); err != nil || p != (Principal{Name: "ops", Role: RoleOperator}) {
		t.Fatalf("operator token: %+v, %v", p, err)
	}
	if _, err := auth.Token(ctx, "nope-nope-nope-nope"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("unknown token: %v", err)
	}

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:5555"
	r.Header.Set("X-Forwarded-User", "sam")
	r.Header.Set("X-Forwarded-Groups", "dev,sre")
	if p, ok, err := auth.Proxy(r); !ok || err != nil || p != (Principal{Name: "sam", Role: RoleAdmin}) {
		t.Fatalf("proxy user: %+v %v %v", p, ok, err)
	}
	r.RemoteAddr = "192.0.2.1:5555" // not a trusted proxy: the header counts for nothing
	if _, ok, _ := auth.Proxy(r); ok {
		t.Fatal("an untrusted address named a proxy user")
	}
	r.Header.Set("Authorization", "Bearer operator-secret-0001")
	if _, ok, _ := auth.Proxy(r); ok {
		t.Fatal("a bearer token passed as a proxy identity")
	}

	open, err := api.NewAuthenticator(api.AuthConfig{InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok, err := APIAuthenticator(open).Proxy(httptest.NewRequest("GET", "/", nil)); !ok || err != nil || p.Role != RoleAdmin {
		t.Fatalf("insecure no-auth: %+v %v %v", p, ok, err)
	}
}
