package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	eh "github.com/redrive/redrive/errorhandler"
)

// Health returns a snapshot of the runner's state.
func (r *Engine[K, V]) Health() eh.Health {
	h := eh.Health{Status: "ok", Halted: []eh.HaltedPartition{}, Waiting: []eh.WaitingPartition{}}
	var reasons []string
	if !r.running.Load() {
		reasons = append(reasons, "not running")
	}
	for _, p := range r.assigned() {
		p.mu.Lock()
		if hs := p.halt; hs != nil {
			h.Halted = append(h.Halted, eh.HaltedPartition{
				Topic: p.key.Topic, Partition: p.key.Partition, Offset: hs.msg.Offset,
				Phase: hs.f.phase, Reason: hs.reason, Code: hs.f.class.Code, Error: errorMessage(hs.f.err), Since: hs.since,
			})
		}
		if p.failingSlots > 0 && p.blockedSlot != nil {
			h.Waiting = append(h.Waiting, eh.WaitingPartition{
				Topic: p.key.Topic, Partition: p.key.Partition, Offset: p.blockedSlot.offset,
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
	key    TP
	offset int64
	action eh.Action
	reply  chan error
}

// Release releases the halted partition topic/partition: its halted record is skipped or
// dead-lettered (action), and the partition resumes after it. When offset is not negative it
// must be the halted record's offset (eh.ErrWrongOffset otherwise), so that an operator releases
// the record they looked at.
func (r *Engine[K, V]) Release(ctx context.Context, topic string, partition int32, offset int64, action eh.Action) error {
	if action != eh.ActionSkip && action != eh.ActionDeadLetter {
		return eh.ErrBadAction
	}
	if !r.running.Load() {
		return eh.ErrNotRunning
	}
	req := releaseRequest{key: TP{Topic: topic, Partition: partition}, offset: offset, action: action, reply: make(chan error, 1)}
	select {
	case r.control <- req:
	case <-r.stopped:
		return eh.ErrNotRunning
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
func (r *Engine[K, V]) serveControl(c Consumer) {
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

func (r *Engine[K, V]) release(req releaseRequest) error {
	r.partsMu.RLock()
	p := r.parts[req.key]
	r.partsMu.RUnlock()
	if p == nil {
		return eh.ErrNotAssigned
	}
	p.mu.Lock()
	h := p.halt
	switch {
	case h == nil:
		p.mu.Unlock()
		return eh.ErrNotHalted
	case req.offset >= 0 && req.offset != h.msg.Offset:
		p.mu.Unlock()
		return fmt.Errorf("%w: halted at %d, not %d", eh.ErrWrongOffset, h.msg.Offset, req.offset)
	case req.action == eh.ActionDeadLetter && r.dl == nil:
		p.mu.Unlock()
		return eh.ErrNoErrorTopic
	}
	p.halt = nil
	p.mu.Unlock()
	p.consecutive.Store(0)
	p.consecGauge.Set(0)
	r.met.halted.Dec()
	off := h.msg.Offset
	r.log.Info("halted partition released", "topic", p.key.Topic, "partition", p.key.Partition, "offset", off, "action", string(req.action))
	if req.action == eh.ActionDeadLetter {
		r.deadLetter(p, &h.msg, h.f, h.inPlace)
	} else {
		r.met.failure(string(h.f.phase), eh.OutcomeSkipped, p.key.Topic)
		p.next.Store(off + 1)
	}
	p.reseek = true
	r.sig.markDirty()
	return nil
}

// releaseBody is the JSON body of a release request.
type releaseBody struct {
	Topic     string    `json:"topic"`
	Partition *int32    `json:"partition"`
	Offset    *int64    `json:"offset"`
	Action    eh.Action `json:"action"`
}

// HealthHandler returns an http.Handler that serves the health snapshot as JSON on GET (status
// 200 whether ok or degraded: a halted partition is not a reason to restart the process) and
// releases a halted partition on POST with a JSON body
// {"topic": "...", "partition": 3, "offset": 42, "action": "skip" | "dead-letter"}
// (offset optional). Errors are application/problem+json.
func (r *Engine[K, V]) HealthHandler() http.Handler {
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
			case errors.Is(err, eh.ErrBadAction):
				writeProblem(w, http.StatusBadRequest, "invalid release request", err.Error())
			case errors.Is(err, eh.ErrNotAssigned), errors.Is(err, eh.ErrNotHalted):
				writeProblem(w, http.StatusNotFound, "nothing to release", err.Error())
			case errors.Is(err, eh.ErrWrongOffset):
				writeProblem(w, http.StatusConflict, "halted at another offset", err.Error())
			case errors.Is(err, eh.ErrNoErrorTopic), errors.Is(err, eh.ErrNotRunning):
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
