package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/internal/testkit/storekit"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/resend"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789ab"
	// noPayloadToken is a viewer without the payload permission.
	noPayloadToken = "nopayload-token-0123456789"
	// fixtureMaxBulk is the bulk cap of the fixture's core: small, so that a test can pass it.
	fixtureMaxBulk = 2
)

// quiet is a logger that discards.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture is the UI over a real operator core on a fresh database, served by httptest. Its
// authenticator knows an operator and a viewer token, and trusts loopback addresses as an
// authenticating proxy whose users are viewers.
type fixture struct {
	t       *testing.T
	pool    *pgxpool.Pool
	store   *storekit.Store
	core    *operator.Core
	handler http.Handler
	srv     *httptest.Server
	// kafka is the cluster retries go to; nil when the fixture does not resend.
	kafka *testkit.Cluster
	// resender is the core's resender; nil when the fixture does not resend.
	resender *resend.Resender
	ids      []uuid.UUID
	// groups are the group ids of the failures of ids[0] (billing) and ids[2] (shipping).
	groups [2]int64
}

// fixtureOptions changes a fixture.
type fixtureOptions struct {
	// resend gives the core a resender over an in-process Kafka with the fixture's topics.
	resend bool
	// core changes the core's configuration.
	core func(*operator.Config)
	// web changes the UI's configuration.
	web func(*Config)
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, fixtureOptions{}) }

func newFixtureWith(t *testing.T, opts fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, pool: testkit.Postgres(t)}
	var err error
	f.store = storekit.New(t, f.pool)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i, spec := range []struct {
		topic, service, code string
		temporality          avro.Temporality
		state                redrive.State
		value                []byte
	}{
		{"orders", "billing", "DESERIALIZATION_FAILED", avro.Permanent, redrive.StatePermanent, []byte(`{"order":1}`)},
		{"orders", "billing", "DESERIALIZATION_FAILED", avro.Permanent, redrive.StatePermanent, []byte("<script>alert(1)</script>")},
		{"shipments", "shipping", "TIMEOUT", avro.Temporary, redrive.StateRetryPending, []byte{0x00, 0xff, 'h', 'i', 0x1b}},
		{"shipments", "shipping", "TIMEOUT", avro.Temporary, redrive.StateResent, []byte("done")},
	} {
		f.ids = append(f.ids, testkit.InsertFailure(t, f.pool, testkit.FailureRow{
			State: spec.state, Temporality: spec.temporality, Topic: spec.topic, ErrorCode: spec.code,
			ErrorMessage: "cannot decode <b>" + spec.topic + "</b>", PublisherService: spec.service, MessageType: "OrderPlaced",
			Key: []byte("key-" + spec.topic), Value: spec.value, HeaderNames: []string{"trace", "nullh"},
			HeaderValues: [][]byte{[]byte("abc"), nil}, CreatedAt: base.Add(time.Duration(i) * time.Minute),
		}))
	}
	for i, id := range []uuid.UUID{f.ids[0], f.ids[2]} {
		if err := f.pool.QueryRow(context.Background(), `SELECT group_id FROM failures WHERE id = $1`, id).Scan(&f.groups[i]); err != nil {
			t.Fatal(err)
		}
	}

	cfg := operator.Config{Store: f.store, MaxBulk: fixtureMaxBulk, Logger: quiet}
	if opts.core != nil {
		opts.core(&cfg)
	}
	if opts.resend {
		f.kafka = testkit.Kafka(t)
		for _, topic := range []string{"orders", "shipments"} {
			f.kafka.CreateTopic(t, topic, 1)
		}
		f.resender = startResender(t, f.store, f.kafka)
		cfg.Resender = f.resender
	}
	if f.core, err = operator.New(cfg); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokens("olivia:operator+payload:" + operatorToken + ",victor:viewer+payload:" + viewerToken +
		",nina:viewer:" + noPayloadToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(auth.Config{Tokens: tokens,
		TrustedProxies:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		ProxyDefaultRole: auth.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := auth.NewSessions(auth.SessionsConfig{Store: f.store})
	if err != nil {
		t.Fatal(err)
	}
	wcfg := Config{Core: f.core, Auth: a, Logger: quiet, PageSize: 2, Sessions: sessions}
	if opts.web != nil {
		opts.web(&wcfg)
	}
	if f.handler, err = New(wcfg); err != nil {
		t.Fatalf("New: %v", err)
	}
	f.srv = httptest.NewServer(f.handler)
	t.Cleanup(f.srv.Close)
	return f
}

// startResender returns the manual resender of a scheduler on cluster that only resends on
// request, running until the test ends.
func startResender(t testing.TB, st *storekit.Store, cluster *testkit.Cluster) *resend.Resender {
	t.Helper()
	sched, err := resend.New(resend.Config{
		Store: st, Brokers: cluster.Bootstrap(), ServiceName: "redrive-web-test",
		Interval: -1, Housekeeping: resend.HousekeepingConfig{Interval: -1}, SendTimeout: 30 * time.Second,
		Producer: kafka.ConfigMap{"log_level": 3}, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("resend scheduler: %v", err)
		}
	})
	return sched.Resender()
}

// state returns the stored state of a failure.
func (f *fixture) state(id uuid.UUID) redrive.State {
	f.t.Helper()
	d, err := f.store.FailureByID(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return d.State
}

// client is a browser-like HTTP client with cookies that does not follow redirects.
type client struct {
	f   *fixture
	c   *http.Client
	hdr http.Header
}

func (f *fixture) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{f: f, hdr: http.Header{}, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (c *client) do(method, path string, form url.Values) (*http.Response, string) {
	c.f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.f.srv.URL+path, body)
	if err != nil {
		c.f.t.Fatal(err)
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the client's session, read from the page at path.
func (c *client) csrf(path string) string {
	c.f.t.Helper()
	_, body := c.do("GET", path, nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		c.f.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

func (c *client) login(token string) {
	c.f.t.Helper()
	tok := c.csrf("/login")
	resp, body := c.do("POST", "/login", url.Values{"csrf": {tok}, "token": {token}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		c.f.t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
}
