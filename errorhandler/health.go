package errorhandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Action is what an operator does with a halted partition's record when releasing it.
type Action string

// The release actions.
const (
	// ActionSkip drops the halted record and resumes the partition after it.
	ActionSkip Action = "skip"
	// ActionDeadLetter publishes the halted record's MPFE and resumes the partition after it;
	// the record is committed when the MPFE is acknowledged.
	ActionDeadLetter Action = "dead-letter"
)

// Errors of Release.
var (
	ErrNotRunning   = errors.New("the runner is not running")
	ErrNotAssigned  = errors.New("the partition is not assigned to this consumer")
	ErrNotHalted    = errors.New("the partition is not halted")
	ErrWrongOffset  = errors.New("the partition is halted at another offset")
	ErrNoErrorTopic = errors.New("no error topic is configured")
	ErrBadAction    = errors.New("unknown action: want skip or dead-letter")
)

// Health is a snapshot of a Runner's state.
type Health struct {
	// Status is "ok" or "degraded".
	Status string `json:"status"`
	// Reason says why the status is degraded.
	Reason string `json:"reason,omitempty"`
	// Halted lists the halted partitions.
	Halted []HaltedPartition `json:"halted"`
	// Waiting lists the partitions paused because the error topic cannot be written.
	Waiting []WaitingPartition `json:"waiting"`
	// DeadLetter describes the MPFE producer; nil without an error topic.
	DeadLetter *DeadLetterHealth `json:"dead_letter,omitempty"`
}

// HaltedPartition is a partition halted at a record.
type HaltedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the halted record's offset: nothing at or after it is committed.
	Offset int64 `json:"offset"`
	// Phase is the phase the record failed in: decode or process.
	Phase Phase `json:"phase"`
	// Reason is "failure" (the Fail policy) or "flood" (the flood guard).
	Reason string `json:"reason"`
	// Code is the failure's error code.
	Code string `json:"code"`
	// Error is the failure's error text.
	Error string    `json:"error"`
	Since time.Time `json:"since"`
}

// WaitingPartition is a partition paused until an MPFE of one of its records gets through.
type WaitingPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the first record whose MPFE has not been acknowledged.
	Offset int64     `json:"offset"`
	Phase  Phase     `json:"phase"`
	Error  string    `json:"error"`
	Since  time.Time `json:"since"`
}

// Health returns a snapshot of the runner's state.
func (r *Runner[K, V]) Health() Health {
	h := Health{Status: "ok", Halted: []HaltedPartition{}, Waiting: []WaitingPartition{}}
	var reasons []string
	if !r.running.Load() {
		reasons = append(reasons, "not running")
	}
	for _, p := range r.assigned() {
		p.mu.Lock()
		if hs := p.halt; hs != nil {
			h.Halted = append(h.Halted, HaltedPartition{
				Topic: p.key.topic, Partition: p.key.partition, Offset: int64(hs.msg.TopicPartition.Offset),
				Phase: hs.f.phase, Reason: hs.reason, Code: hs.f.class.Code, Error: errorMessage(hs.f.err), Since: hs.since,
			})
		}
		if p.failingSlots > 0 && p.blockedSlot != nil {
			h.Waiting = append(h.Waiting, WaitingPartition{
				Topic: p.key.topic, Partition: p.key.partition, Offset: p.blockedSlot.offset,
				Phase: p.blockedPhase, Error: p.blockedErr, Since: p.blockedSince,
			})
		}
		p.mu.Unlock()
	}
	sort.Slice(h.Halted, func(i, j int) bool {
		return lessTP(h.Halted[i].Topic, h.Halted[i].Partition, h.Halted[j].Topic, h.Halted[j].Partition)
	})
	sort.Slice(h.Waiting, func(i, j int) bool {
		return lessTP(h.Waiting[i].Topic, h.Waiting[i].Partition, h.Waiting[j].Topic, h.Waiting[j].Partition)
	})
	if n := len(h.Halted); n > 0 {
		reasons = append(reasons, fmt.Sprintf("%d partition(s) halted", n))
	}
	if r.running.Load() && r.dl != nil {
		dh := r.dl.Health()
		h.DeadLetter = &dh
		if dh.Retrying > 0 || len(h.Waiting) > 0 {
			reasons = append(reasons, fmt.Sprintf("error topic %s cannot be written: %s", dh.ErrorTopic, dh.LastError))
		}
	}
	if len(reasons) > 0 {
		h.Status, h.Reason = "degraded", strings.Join(reasons, "; ")
	}
	return h
}

func lessTP(t1 string, p1 int32, t2 string, p2 int32) bool {
	if t1 != t2 {
		return t1 < t2
	}
	return p1 < p2
}

// releaseRequest asks the poll loop to release a halted partition.
type releaseRequest struct {
	key    tpKey
	offset int64
	action Action
	reply  chan error
}

// Release releases the halted partition topic/partition: its halted record is skipped or
// dead-lettered (action), and the partition resumes after it. When offset is not negative it
// must be the halted record's offset (ErrWrongOffset otherwise), so that an operator releases
// the record they looked at.
func (r *Runner[K, V]) Release(ctx context.Context, topic string, partition int32, offset int64, action Action) error {
	if action != ActionSkip && action != ActionDeadLetter {
		return ErrBadAction
	}
	if !r.running.Load() {
		return ErrNotRunning
	}
	req := releaseRequest{key: tpKey{topic: topic, partition: partition}, offset: offset, action: action, reply: make(chan error, 1)}
	select {
	case r.control <- req:
	case <-r.stopped:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveControl serves the release requests waiting, without blocking.
func (r *Runner[K, V]) serveControl(c *kafka.Consumer) {
	for {
		select {
		case req := <-r.control:
			req.reply <- r.release(req)
			r.reconcile(c)
		default:
			return
		}
	}
}

func (r *Runner[K, V]) release(req releaseRequest) error {
	r.partsMu.RLock()
	p := r.parts[req.key]
	r.partsMu.RUnlock()
	if p == nil {
		return ErrNotAssigned
	}
	p.mu.Lock()
	h := p.halt
	switch {
	case h == nil:
		p.mu.Unlock()
		return ErrNotHalted
	case req.offset >= 0 && req.offset != int64(h.msg.TopicPartition.Offset):
		p.mu.Unlock()
		return fmt.Errorf("%w: halted at %d, not %d", ErrWrongOffset, int64(h.msg.TopicPartition.Offset), req.offset)
	case req.action == ActionDeadLetter && r.dl == nil:
		p.mu.Unlock()
		return ErrNoErrorTopic
	}
	p.halt = nil
	p.mu.Unlock()
	p.consecutive.Store(0)
	p.consecGauge.Set(0)
	r.met.halted.Dec()
	off := int64(h.msg.TopicPartition.Offset)
	r.log.Info("halted partition released", "topic", p.key.topic, "partition", p.key.partition, "offset", off, "action", string(req.action))
	if req.action == ActionDeadLetter {
		r.deadLetter(p, h.msg, h.f)
	} else {
		r.met.failure(string(h.f.phase), OutcomeSkipped, p.key.topic)
		p.next.Store(off + 1)
	}
	p.reseek = true
	r.dirty.Store(true)
	return nil
}

// releaseBody is the JSON body of a release request.
type releaseBody struct {
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Offset    *int64 `json:"offset"`
	Action    Action `json:"action"`
}

// HealthHandler returns an http.Handler that serves the health snapshot as JSON on GET (status
// 200 whether ok or degraded: a halted partition is not a reason to restart the process) and
// releases a halted partition on POST with a JSON body
// {"topic": "...", "partition": 3, "offset": 42, "action": "skip" | "dead-letter"}
// (offset optional). Errors are application/problem+json.
func (r *Runner[K, V]) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.Method {
		case http.MethodGet, http.MethodHead:
			writeJSON(w, http.StatusOK, r.Health())
		case http.MethodPost:
			var body releaseBody
			dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<16))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				writeProblem(w, http.StatusBadRequest, "invalid release request", err.Error())
				return
			}
			if body.Topic == "" || body.Partition == nil {
				writeProblem(w, http.StatusBadRequest, "invalid release request", "topic and partition are required")
				return
			}
			offset := int64(-1)
			if body.Offset != nil {
				offset = *body.Offset
			}
			err := r.Release(req.Context(), body.Topic, *body.Partition, offset, body.Action)
			switch {
			case err == nil:
				writeJSON(w, http.StatusOK, r.Health())
			case errors.Is(err, ErrBadAction):
				writeProblem(w, http.StatusBadRequest, "invalid release request", err.Error())
			case errors.Is(err, ErrNotAssigned), errors.Is(err, ErrNotHalted):
				writeProblem(w, http.StatusNotFound, "nothing to release", err.Error())
			case errors.Is(err, ErrWrongOffset):
				writeProblem(w, http.StatusConflict, "halted at another offset", err.Error())
			case errors.Is(err, ErrNoErrorTopic), errors.Is(err, ErrNotRunning):
				writeProblem(w, http.StatusServiceUnavailable, "cannot release", err.Error())
			default:
				writeProblem(w, http.StatusInternalServerError, "release failed", err.Error())
			}
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			writeProblem(w, http.StatusMethodNotAllowed, "method not allowed", req.Method+" is not supported")
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
}
