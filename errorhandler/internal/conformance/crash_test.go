package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/intake"
)

// Environment of the crash child (TestCrashChild), a consumer process that the parent kills.
const (
	envCrashChild     = "EH_CRASH_CHILD"
	envCrashBootstrap = "EH_CRASH_BOOTSTRAP"
)

// TestCrashRedeadLettersWithTheSameIdentity kills a consumer process (SIGKILL) after every
// failing record's MPFE was acknowledged but before any offset was committed. Its successor in
// the group handles the records again and dead-letters the failing ones again: each with the
// idempotenceId of its first event, so N failing records give exactly N distinct failures
// (the service's intake, run over the error topic at the end, stores exactly N rows).
func TestCrashRedeadLettersWithTheSameIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	forEachAdapter(t, func(t *testing.T, a adapter) {
		e := newEnv(t, a, 2)
		const perPartition, failing = 100, 40 // every fifth record fails
		for p := int32(0); p < 2; p++ {
			vals := values("ok", perPartition)
			for i := 4; i < perPartition; i += 5 {
				vals[i] = fmt.Sprintf("fail%d", i)
			}
			e.produce(p, vals...)
		}
		group := "crash-" + string(a)

		child := startChild(t, "TestCrashChild", envCrashChild+"="+string(a)+":"+group, envCrashBootstrap+"="+e.k.Bootstrap())
		waitFor(t, "every failing record dead-lettered by the child", func() bool {
			child.checkRunning(t)
			return e.errTopicCount() >= failing
		})
		child.kill(t)
		for p := int32(0); p < 2; p++ {
			if c := e.committed(group, p); c > 0 {
				t.Fatalf("the killed child committed %d on partition %d: the test needs a crash before the commit", c, p)
			}
		}

		h := newRecorder()
		cfg := e.config(group, h)
		cfg.ProcessPolicy = eh.DeadLetter
		s := e.start(cfg)
		for p := int32(0); p < 2; p++ {
			waitFor(t, "the successor committed to the end", func() bool { return e.committed(group, p) == perPartition })
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		n := e.errTopicCount()
		if n < 2*failing {
			t.Fatalf("error topic has %d events, want each of the %d failing records dead-lettered twice", n, failing)
		}
		ids := map[string]string{} // idempotenceId -> record
		events := map[string]int{} // record -> events
		for _, ev := range e.mpfes(int(n)) {
			rec := fmt.Sprintf("%d/%d", ev.References.Message.Partition, ev.References.Message.Offset)
			events[rec]++
			id := ev.Identity.IdempotenceID
			if prev, ok := ids[id]; ok && prev != rec {
				t.Errorf("idempotenceId %s names records %s and %s", id, prev, rec)
			}
			ids[id] = rec
		}
		if len(ids) != failing || len(events) != failing {
			t.Errorf("%d events name %d records with %d idempotenceIds, want %d and %d", n, len(events), len(ids), failing, failing)
		}
		checkStoredOnce(t, e, failing)
	})
}

// checkStoredOnce runs the service's intake over the error topic into a fresh database: the
// failing records must be stored as exactly want rows, each a first attempt.
func checkStoredOnce(t *testing.T, e *env, want int) {
	t.Helper()
	pool, _, in := newServiceIntake(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("intake: %v", err)
		}
	}()
	end := e.k.EndOffsets(testErrTopic)
	waitFor(t, "the intake committed the whole error topic", func() bool {
		committed := e.k.CommittedOffsets(intake.DefaultGroupID, testErrTopic)
		for p, hw := range end {
			if committed[p] != hw {
				return false
			}
		}
		return true
	})
	var rows, maxAttempt int
	if err := pool.QueryRow(context.Background(), `SELECT count(*), coalesce(max(attempt), 0) FROM failures`).Scan(&rows, &maxAttempt); err != nil {
		t.Fatal(err)
	}
	if rows != want || maxAttempt != 1 {
		t.Errorf("the service stored %d rows (highest attempt %d), want %d rows, each attempt 1", rows, maxAttempt, want)
	}
}

// TestCrashChild is the consumer process of TestCrashRedeadLettersWithTheSameIdentity: it
// dead-letters failures and never commits, until it is killed.
func TestCrashChild(t *testing.T) {
	spec := os.Getenv(envCrashChild)
	if spec == "" {
		t.Skip("runs only as the child of TestCrashRedeadLettersWithTheSameIdentity")
	}
	a, group, _ := strings.Cut(spec, ":")
	e := &env{t: t, a: adapter(a), reg: prometheus.NewRegistry()}
	cfg := eh.Config[[]byte, string]{
		GroupID: group, Topics: []string{testTopic}, System: "test-system", Service: "test-service",
		KeyDecoder: eh.Bytes(), ValueDecoder: stringDecoder(), Handler: newRecorder(),
		ProcessPolicy:  eh.DeadLetter,
		DeadLetter:     eh.DeadLetterConfig{ErrorTopic: testErrTopic},
		CommitInterval: time.Hour, // never commits before it is killed
		Metrics:        e.reg,
	}
	bootstrap := os.Getenv(envCrashBootstrap)
	r, err := newRunnerAt(e, cfg, bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Run(context.Background()) // until killed
}

// childProcess is a test of this binary running in a child process (startChild).
type childProcess struct {
	cmd    *exec.Cmd
	out    strings.Builder // its output, stdout and stderr
	exited chan error      // receives Wait's result
}

// startChild runs the test named test of this binary in a child process, with env added to
// its environment.
func startChild(t *testing.T, test string, env ...string) *childProcess {
	t.Helper()
	c := &childProcess{cmd: exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1"), exited: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exited <- c.cmd.Wait() }()
	return c
}

// checkRunning fails the test, with the child's output, when the child has exited.
func (c *childProcess) checkRunning(t *testing.T) {
	t.Helper()
	select {
	case err := <-c.exited:
		t.Fatalf("the child exited early: %v\n%s", err, c.out.String())
	default:
	}
}

// kill kills the child (SIGKILL) and waits for it to exit.
func (c *childProcess) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.exited
}
