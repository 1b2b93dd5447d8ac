package conformance

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eh "github.com/redrive/redrive/errorhandler"
)

// Environment of the static-membership child (TestStaticMemberChild).
const (
	envStaticChild     = "EH_STATIC_CHILD"
	envStaticBootstrap = "EH_STATIC_BOOTSTRAP"
)

// staticSessionTimeout is the group session timeout of the resume test: a dynamic member
// killed without leaving the group holds its partitions this long. 10s, or
// EH_STATIC_SESSION_TIMEOUT (e.g. 45s, the clients' default) for a measurement.
func staticSessionTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EH_STATIC_SESSION_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 10 * time.Second
}

// firstSeen is a recorder that notes when it handled its first record.
type firstSeen struct {
	*recorder
	mu    sync.Mutex
	first time.Time
}

func (h *firstSeen) Handle(ctx context.Context, rec eh.Record[[]byte, string]) error {
	h.mu.Lock()
	if h.first.IsZero() {
		h.first = time.Now()
	}
	h.mu.Unlock()
	return h.recorder.Handle(ctx, rec)
}

func (h *firstSeen) firstAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
}

// TestStaticMembershipResume kills a consumer process (SIGKILL: it neither leaves the group
// nor commits again) and starts its successor at once, with and without a GroupInstanceID.
// A static member takes its partitions back at once; a dynamic one waits until the broker
// drops the dead member after the session timeout. Either way no record is lost: the
// successor handles every record from the last commit on (those the dead member handled
// after its last commit a second time, as at-least-once allows) and commits to the end. The
// time from the successor's start to its first handled record is logged (docs/benchmarks.md
// lists the figures); the only bound is that a static member resumes within the session
// timeout.
func TestStaticMembershipResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes and waits a session timeout")
	}
	forEachAdapter(t, func(t *testing.T, a adapter) {
		for _, mode := range []string{"static", "dynamic"} {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				instanceID := ""
				if mode == "static" {
					instanceID = "orders-0"
				}
				resume := staticResume(t, a, instanceID)
				t.Logf("%s, %s membership: first record handled %v after the restart (session timeout %v)",
					a, mode, resume.Round(time.Millisecond), staticSessionTimeout())
				if mode == "static" && resume >= staticSessionTimeout() {
					t.Errorf("a static member resumed after %v, not before the session timeout %v", resume, staticSessionTimeout())
				}
			})
		}
	})
}

// staticResume runs one kill and restart and returns the successor's time to its first record.
func staticResume(t *testing.T, a adapter, instanceID string) time.Duration {
	e := newEnv(t, a, 2)
	e.tun = tuning{sessionTimeout: staticSessionTimeout(), instanceID: instanceID}
	const before, after = 50, 50 // records per partition before and after the kill
	for p := int32(0); p < 2; p++ {
		e.produce(p, values("ok", before)...)
	}
	group := "static-" + string(a) + "-" + strconv.FormatBool(instanceID != "")

	child := startChild(t, "TestStaticMemberChild", envStaticChild+"="+string(a)+":"+group+":"+instanceID,
		envStaticBootstrap+"="+e.k.Bootstrap())
	for p := int32(0); p < 2; p++ {
		waitFor(t, "the child committed what it handled", func() bool {
			child.checkRunning(t)
			return e.committed(group, p) == before
		})
	}
	child.kill(t)
	lastCommit := map[int32]int64{}
	for p := int32(0); p < 2; p++ {
		lastCommit[p] = e.committed(group, p)
		e.produce(p, values("later", after)...)
	}

	h := &firstSeen{recorder: newRecorder()}
	started := time.Now()
	s := e.start(e.config(group, h))
	// A dynamic successor waits for the session timeout before it gets any partition.
	deadline := started.Add(staticSessionTimeout() + waitTimeout)
	for p := int32(0); p < 2; p++ {
		for e.committed(group, p) != before+after {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for the successor to commit partition %d to the end", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		seen := map[int64]bool{}
		for _, off := range h.offsets(p) {
			seen[off] = true
		}
		for off := lastCommit[p]; off < before+after; off++ {
			if !seen[off] {
				t.Errorf("partition %d: offset %d (after the last commit %d) was never handled by the successor", p, off, lastCommit[p])
			}
		}
	}
	return h.firstAt().Sub(started)
}

// TestStaticMemberChild is the consumer process of TestStaticMembershipResume: it handles and
// commits until it is killed.
func TestStaticMemberChild(t *testing.T) {
	spec := os.Getenv(envStaticChild)
	if spec == "" {
		t.Skip("runs only as the child of TestStaticMembershipResume")
	}
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) != 3 {
		t.Fatalf("%s=%q", envStaticChild, spec)
	}
	e := &env{t: t, a: adapter(parts[0]), reg: prometheus.NewRegistry(),
		tun: tuning{sessionTimeout: staticSessionTimeout(), instanceID: parts[2]}}
	cfg := eh.Config[[]byte, string]{
		GroupID: parts[1], Topics: []string{testTopic}, System: "test-system", Service: "test-service",
		KeyDecoder: eh.Bytes(), ValueDecoder: stringDecoder(), Handler: newRecorder(),
		DeadLetter:     eh.DeadLetterConfig{ErrorTopic: testErrTopic},
		CommitInterval: 50 * time.Millisecond,
		Metrics:        e.reg,
	}
	r, err := newRunnerAt(e, cfg, os.Getenv(envStaticBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Run(context.Background()) // until killed
}
