package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/avro"
	eh "github.com/redrive/redrive/errorhandler"
	"github.com/redrive/redrive/internal/promreg"
)

// errParked is the error of a record the ordering guard parked.
var errParked = errors.New("parked behind an earlier failure of its key")

// errReplayedHead is the error of a head failure dead-lettered again after a restart: its own
// error was reported by the first event of the same idempotenceId.
var errReplayedHead = errors.New("head failure dead-lettered again after a restart (the first event of this idempotenceId holds the error)")

// guardEntry is the state of one guarded key on a partition, as it is stored.
type guardEntry struct {
	// Head is the causing-message identity of the key's head failure; empty once resolved.
	Head string `json:"h,omitempty"`
	// HeadEvent is the event id of the head's MPFE.
	HeadEvent string `json:"e,omitempty"`
	// Parked are the identities of the parked records, in the order they are handed over.
	// Each is stored as a record of its own, numbered from First, so that a change writes one
	// identity, not the list.
	Parked []string `json:"-"`
	// First is the number of Parked[0].
	First int64 `json:"f,omitempty"`
	// Through is the offset of the last record that changed the entry: a record at or below it
	// is a replay after a crash.
	Through int64 `json:"t"`
	// handed are the identities handed over while the entry lived (its resolved heads and
	// released records), kept in memory only: a second resend of one of them (the service
	// resent it twice) is dropped instead of being parked and handed over out of order.
	handed map[string]struct{} `json:"-"`
}

// markHanded notes that id was handed over.
func (ent *guardEntry) markHanded(id string) {
	if ent.handed == nil {
		ent.handed = map[string]struct{}{}
	}
	ent.handed[id] = struct{}{}
}

// size is the number of the guard's entries ent takes: its head and each parked record.
func (ent *guardEntry) size() int {
	n := len(ent.Parked)
	if ent.Head != "" {
		n++
	}
	return n
}

// Keys of the store's records: a guarded key's entry ("k" + key), one parked identity of a key
// ("p" + its 8-byte big-endian number + key), or the partition's overflow marker.
const (
	guardKeyPrefix    = "k"
	guardParkedPrefix = "p"
	guardOverflow     = "o"
)

// parkedKey returns the store key of a key's parked identity number n.
func parkedKey(key string, n int64) []byte {
	b := make([]byte, 0, 9+len(key))
	b = append(b, guardParkedPrefix...)
	b = binary.BigEndian.AppendUint64(b, uint64(n))
	return append(b, key...)
}

// guard is the ordering guard of one partition. It is owned by the partition's worker (and by a
// release, which runs while the worker is idle).
type guard struct {
	store   eh.OrderingStore
	max     int
	atLimit eh.OrderingLimitPolicy

	loaded   bool
	ready    chan struct{} // closed when the first read of the store ended (see attachGuard)
	keys     map[string]*guardEntry
	size     int
	overflow string // "overflow:topic/partition@offset" once the partition overflowed
	// overflowAt is the offset where the partition overflowed: a record before it is a replay.
	overflowAt int64
	// limitAt is the offset of the record the partition halted at for the limit: its release
	// with dead-letter may exceed the bound (the partition could not drain otherwise).
	limitAt int64

	writer guardWriter
	// gauge is redrive_errorhandler_ordering_entries (nil when it cannot be registered).
	gauge *prometheus.GaugeVec

	// clear is set by ClearOrdering: the worker drops the partition's guard state.
	clear atomic.Bool
	// resolve holds the keys whose head an operator resolved (ResolveOrdering), applied by the
	// worker before the partition's next record; resolving is set while it is not empty.
	resolveMu sync.Mutex
	resolve   []string
	resolving atomic.Bool
}

// attachGuard gives p an ordering guard when its topic is guarded, and starts reading its
// state from the store (see awaitGuards).
func (e *Engine[K, V]) attachGuard(p *partition) {
	o := e.cfg.Ordering
	if !o.Guards(p.key.Topic) {
		return
	}
	g := &guard{store: o.Store, max: o.MaxParked, atLimit: o.AtLimit, keys: map[string]*guardEntry{}, limitAt: -1, ready: make(chan struct{})}
	g.gauge = e.guardGauge()
	p.guard = g
	go func() {
		defer close(g.ready)
		ctx, cancel := context.WithTimeout(p.ctx, preloadTimeout)
		defer cancel()
		if err := e.tryLoadGuard(ctx, p); err != nil {
			e.log.Warn("ordering guard: store read failed; the partition's worker retries", "topic", p.key.Topic, "partition", p.key.Partition, "error", err)
		}
	}()
}

// guardGauge returns the gauge of the guards' entries, registered on the configured registry
// (shared with other runners there), or nil when that fails.
func (e *Engine[K, V]) guardGauge() *prometheus.GaugeVec {
	if e.cfg.Metrics == nil {
		return nil
	}
	set := promreg.New(e.cfg.Metrics)
	g := promreg.Register(set, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "redrive", Subsystem: "errorhandler", Name: "ordering_entries",
		Help: "Entries of a partition's ordering guard: unresolved heads and parked records, by topic and partition.",
	}, []string{"topic", "partition"}))
	if err := set.Err(); err != nil {
		e.log.Warn("ordering guard: cannot register its gauge", "error", err)
		return nil
	}
	return g
}

// reportSize sets p's gauge to its guard's entries.
func (g *guard) reportSize(p *partition) {
	if g.gauge != nil {
		g.gauge.WithLabelValues(p.key.Topic, partitionLabel(p.key.Partition)).Set(float64(g.size))
	}
}

// dropGuard removes p's gauge when p is let go.
func (e *Engine[K, V]) dropGuard(p *partition) {
	if p.guard != nil && p.guard.gauge != nil {
		p.guard.gauge.DeleteLabelValues(p.key.Topic, partitionLabel(p.key.Partition))
	}
}

// preloadTimeout bounds the first read of the guard states of newly assigned partitions.
const preloadTimeout = 2 * time.Second

// awaitGuards waits, at most preloadTimeout, until the first reads of the guards of tps ended:
// Assign calls it so that the partitions' records are fetched once their state is known (a
// worker that read while its queue filled would make the poll loop wait for it).
func (e *Engine[K, V]) awaitGuards(tps []TP) {
	if !e.cfg.Ordering.Enabled() {
		return
	}
	t := time.NewTimer(preloadTimeout)
	defer t.Stop()
	for _, tp := range tps {
		p := e.parts[tp]
		if p == nil || p.guard == nil {
			continue
		}
		select {
		case <-p.guard.ready:
		case <-t.C:
			return
		}
	}
}

// loadGuard waits for the first read of p's guard state and, if it failed, reads again with
// backoff until it succeeds or p is let go (then it returns false and the worker stops).
func (e *Engine[K, V]) loadGuard(p *partition) bool {
	select {
	case <-p.guard.ready:
	case <-p.quit:
		return false
	}
	for attempt := 1; !p.guard.loaded; attempt++ {
		err := e.tryLoadGuard(p.ctx, p)
		if err == nil {
			return true
		}
		if !e.guardWait(p, attempt, "load", err) {
			return false
		}
	}
	return true
}

// tryLoadGuard reads p's guard state from the store once.
func (e *Engine[K, V]) tryLoadGuard(ctx context.Context, p *partition) error {
	g := p.guard
	stored, err := g.store.Load(ctx, p.key.Topic, p.key.Partition)
	if err != nil {
		return err
	}
	parked := map[string]map[int64]string{}
	for k, v := range stored {
		switch {
		case k == guardOverflow:
			g.setOverflow(string(v))
		case len(k) >= 9 && k[:1] == guardParkedPrefix:
			key, n := k[9:], int64(binary.BigEndian.Uint64([]byte(k[1:9])))
			if parked[key] == nil {
				parked[key] = map[int64]string{}
			}
			parked[key][n] = string(v)
		case len(k) >= 1 && k[:1] == guardKeyPrefix:
			var ent guardEntry
			if err := json.Unmarshal(v, &ent); err != nil {
				e.log.Error("ordering guard: unreadable stored entry dropped", "topic", p.key.Topic, "partition", p.key.Partition, "error", err)
				continue
			}
			g.keys[k[1:]] = &ent
		}
	}
	for key, ent := range g.keys {
		for n := ent.First; ; n++ {
			id, ok := parked[key][n]
			if !ok {
				break
			}
			ent.Parked = append(ent.Parked, id)
		}
		g.size += ent.size()
	}
	g.loaded = true
	g.reportSize(p)
	e.log.Info("ordering guard loaded", "topic", p.key.Topic, "partition", p.key.Partition, "keys", len(g.keys), "entries", g.size, "overflow", g.overflow)
	return nil
}

// guardWait logs a failed store call and waits before the next attempt; false when p is let go.
func (e *Engine[K, V]) guardWait(p *partition, attempt int, op string, err error) bool {
	return e.guardBackoff(p, attempt, "ordering guard: store "+op+" failed; retrying, the partition waits", err, p.quit)
}

// saveKey queues key's entry for the store after the records of extra (its parked identities
// added or removed): the entry itself, or its deletion when it is empty. done (optional) runs
// once they are acknowledged (see guardWriter).
func (e *Engine[K, V]) saveKey(p *partition, key string, ent *guardEntry, done func(), extra ...eh.OrderingRecord) {
	rec := eh.OrderingRecord{Key: []byte(guardKeyPrefix + key)}
	if ent != nil && ent.size() > 0 {
		rec.Value, _ = json.Marshal(ent) // strings and integers: cannot fail
	}
	e.enqueueSave(p, append(extra, rec), done)
}

// guardRetryWait waits before writing the guard's changes again; false when p was dropped.
func (e *Engine[K, V]) guardRetryWait(p *partition, attempt int, err error) bool {
	return e.guardBackoff(p, attempt, "ordering guard: store write failed; retrying, the records it concerns stay uncommitted", err, nil)
}

// guardBackoff logs msg with err (throttled per topic) and waits the dead-letter retry backoff
// of attempt; false when quit (nil: never) is closed or p's context ends first.
func (e *Engine[K, V]) guardBackoff(p *partition, attempt int, msg string, err error, quit <-chan struct{}) bool {
	if ok, n := e.throttle.allow("ordering:" + p.key.Topic); ok {
		e.log.Warn(msg, "topic", p.key.Topic, "partition", p.key.Partition, "attempt", attempt, "error", err, "suppressed", n)
	}
	delay := min(e.cfg.DeadLetter.RetryBackoff<<min(attempt-1, 10), e.cfg.DeadLetter.MaxRetryBackoff)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-quit:
	case <-p.ctx.Done():
	}
	return false
}

// popParked removes ent's first parked identity and returns the store record that deletes it.
func popParked(key string, ent *guardEntry) eh.OrderingRecord {
	rec := eh.OrderingRecord{Key: parkedKey(key, ent.First)}
	ent.Parked = ent.Parked[1:]
	ent.First++
	return rec
}

// handle handles one record, through the ordering guard when p has one.
func (e *Engine[K, V]) handle(p *partition, msg *eh.Message) bool {
	if p.guard == nil {
		return e.process(p, msg)
	}
	return e.guarded(p, msg)
}

// identity returns msg's causing-message identity, as the service computes it: the Extractor's
// id, else the redrive-origin header, else topic/partition/offset.
func (e *Engine[K, V]) identity(msg *eh.Message) string {
	if ex := e.cfg.DeadLetter.Extractor; ex != nil {
		if id := ex(msg).ID; id != "" {
			return id
		}
	}
	if o, ok := msg.HeaderValue(avro.HeaderOrigin); ok && len(o) > 0 {
		return string(o)
	}
	return msg.Topic + "/" + strconv.FormatInt(int64(msg.Partition), 10) + "/" + strconv.FormatInt(msg.Offset, 10)
}

// guarded handles msg on a guarded partition: it is handed over (process) unless its key is
// blocked, or the partition overflowed; then it is parked.
func (e *Engine[K, V]) guarded(p *partition, msg *eh.Message) bool {
	g := p.guard
	if g.clear.Load() && g.clear.Swap(false) {
		e.clearGuard(p)
	}
	if g.resolving.Load() {
		e.resolveHeads(p)
	}
	if msg.Key == nil || (len(g.keys) == 0 && g.overflow == "") {
		return e.process(p, msg) // nothing parked: the happy path costs no lookup
	}
	overflowed := g.overflow != "" && msg.Offset >= g.overflowAt
	var ent *guardEntry
	if !overflowed {
		if ent = g.keys[string(msg.Key)]; ent == nil {
			return e.process(p, msg) // a dead-letter of msg creates the entry (guardDeadLetter)
		}
	}
	if e.filtered(msg) {
		return e.process(p, msg) // a resend meant for another service: not ours to order
	}
	if overflowed {
		e.park(p, msg, avro.Permanent)
		return false
	}
	id := e.identity(msg)
	if msg.Offset <= ent.Through {
		// A replay after a crash: repeat what was decided (the store already holds it).
		switch {
		case id == ent.Head:
			e.deadLetter(p, msg, failure{phase: eh.PhaseProcess, err: errReplayedHead,
				class: eh.Classification{Temporality: avro.Unknown, Code: avro.CodeUnknownException}}, 0)
		case slices.Contains(ent.Parked, id):
			e.park(p, msg, avro.Permanent)
		default:
			p.next.Store(msg.Offset + 1) // handed over before the crash
		}
		return false
	}
	if released, ok := msg.HeaderValue(avro.HeaderRelease); ok && ent.Head != "" && string(released) == ent.Head {
		// The head was closed with release by an operator.
		ent.Head, ent.HeadEvent = "", ""
		g.size--
	}
	if _, dup := ent.handed[id]; dup {
		// The same resend again: its record was handed over already.
		e.met.failure(string(eh.PhaseProcess), eh.OutcomeSkipped, p.key.Topic)
		if ok, n := e.throttle.allow("ordering-dup:" + p.key.Topic); ok {
			e.log.Warn("ordering guard: a resend of a record already handed over was dropped", "topic", p.key.Topic,
				"partition", p.key.Partition, "offset", msg.Offset, "identity", id, "suppressed", n)
		}
		p.next.Store(msg.Offset + 1)
		return false
	}
	switch {
	case ent.Head != "" && id == ent.Head:
		// The head's resend: hand it over; success resolves the head.
		return e.handOver(p, msg, ent, func() []eh.OrderingRecord { ent.Head = ""; g.size--; ent.markHanded(id); return nil })
	case ent.Head == "" && len(ent.Parked) > 0 && id == ent.Parked[0]:
		// The next parked record's resend.
		return e.handOver(p, msg, ent, func() []eh.OrderingRecord {
			g.size--
			ent.markHanded(id)
			return []eh.OrderingRecord{popParked(string(msg.Key), ent)}
		})
	case ent.Head == "" && len(ent.Parked) == 0:
		// Released by the header above, nothing parked: the key is free.
		return e.handOver(p, msg, ent, func() []eh.OrderingRecord { return nil })
	}
	temporality := avro.Permanent
	if ent.Head == "" {
		temporality = avro.Temporary // the service resends it on its own: the head is resolved
	}
	e.park(p, msg, temporality)
	return false
}

// handOver hands msg, a record of a guarded key, to the handler; on success resolved updates
// ent, and the entry is stored (deleted when nothing is left) before msg's offset may be
// committed (a slot holds it). A failure is dead-lettered by process, and guardDeadLetter
// updates ent.
func (e *Engine[K, V]) handOver(p *partition, msg *eh.Message, ent *guardEntry, resolved func() []eh.OrderingRecord) bool {
	hold := &offsetSlot{offset: msg.Offset, p: p}
	p.mu.Lock()
	p.track.add(hold)
	p.mu.Unlock()
	ok := e.process(p, msg)
	if !ok {
		finishHold(hold) // a failure's own slot (and its guard change) holds the offset
		return false
	}
	extra := resolved()
	ent.Through = msg.Offset
	key := string(msg.Key)
	if ent.size() == 0 {
		delete(p.guard.keys, key)
	}
	e.saveKey(p, key, ent, func() { finishHold(hold) }, extra...)
	return true
}

// park dead-letters msg as parked behind its key's head (guardDeadLetter adds the references).
func (e *Engine[K, V]) park(p *partition, msg *eh.Message, temporality avro.Temporality) {
	e.met.failure(string(eh.PhaseProcess), eh.OutcomeParked, p.key.Topic)
	e.deadLetter(p, msg, failure{phase: eh.PhaseProcess, err: errParked,
		class: eh.Classification{Temporality: temporality, Code: avro.CodeParkedBehind}}, 0)
}

// guardDeadLetter updates p's guard for msg, about to be dead-lettered as j. It returns true
// when deadLetter goes on as usual (nothing to store); false when it took over (the change is
// queued for the store and the MPFE is produced once it is stored), or when msg must not be
// dead-lettered (the partition halted at the limit).
func (e *Engine[K, V]) guardDeadLetter(p *partition, msg *eh.Message, j *Job) bool {
	g := p.guard
	if msg.Key == nil || !g.loaded {
		return true
	}
	parked := j.f.class.Code == avro.CodeParkedBehind && errors.Is(j.f.err, errParked)
	if g.overflow != "" && msg.Offset >= g.overflowAt {
		if parked {
			markParked(j, "", g.overflow)
		}
		return e.afterStored(p, msg, j, nil) // behind the overflow marker's write
	}
	key := string(msg.Key)
	ent := g.keys[key]
	if ent != nil && msg.Offset <= ent.Through {
		if parked {
			markParked(j, ent.HeadEvent, ent.Head)
		}
		return true // a replay: the state is stored already
	}
	id := e.identity(msg)
	var extra []eh.OrderingRecord
	switch {
	case ent == nil && !parked:
		// A new head.
		if !e.guardRoom(p, msg, j) {
			if g.overflow != "" { // overflowed: dead-lettered as it is, untracked
				return e.afterStored(p, msg, j, nil)
			}
			return false
		}
		ent = &guardEntry{Head: id}
		g.keys[key] = ent
		g.size++
	case ent == nil:
		return true // parked by a limit halt's release after the key was cleared: nothing to track
	case !parked && ent.Head != "" && id == ent.Head:
		// The head's resend failed again: it stays the head.
	case !parked && ent.Head == "" && len(ent.Parked) > 0 && id == ent.Parked[0]:
		// The next parked record failed: it becomes the head.
		extra = append(extra, popParked(key, ent))
		ent.Head = id
	default:
		if !parked {
			// A failure of a record that was to be parked (a release of a limit halt): it is
			// parked all the same.
			parked = true
		}
		markParked(j, ent.HeadEvent, headRef(ent))
		if !slices.Contains(ent.Parked, id) {
			if !e.guardRoom(p, msg, j) {
				if g.overflow != "" {
					markParked(j, "", g.overflow)
					return e.afterStored(p, msg, j, nil)
				}
				return false
			}
			extra = append(extra, eh.OrderingRecord{Key: parkedKey(key, ent.First+int64(len(ent.Parked))), Value: []byte(id)})
			ent.Parked = append(ent.Parked, id)
			g.size++
		}
	}
	if !parked {
		ent.HeadEvent = j.ev.Identity.EventID
	}
	ent.Through = msg.Offset
	rec := eh.OrderingRecord{Key: []byte(guardKeyPrefix + key)}
	if ent.size() > 0 {
		rec.Value, _ = json.Marshal(ent) // strings and integers: cannot fail
	}
	return e.afterStored(p, msg, j, append(extra, rec))
}

// afterStored dead-letters msg as j once recs (and every change queued before them) are
// stored: the MPFE is produced then, and the record's offset is held by the MPFE's slot until
// both are acknowledged. It returns false: deadLetter leaves the rest to it.
func (e *Engine[K, V]) afterStored(p *partition, msg *eh.Message, j *Job, recs []eh.OrderingRecord) bool {
	s := j.sink.(*offsetSlot)
	p.mu.Lock()
	p.track.add(s)
	p.mu.Unlock()
	p.next.Store(msg.Offset + 1) // after the slot is queued: see offsetTracker
	e.enqueueSave(p, recs, func() { e.dl.submit(j) })
	return false
}

// headRef is the head reference of ent's parked records: the head, or, once it was resolved,
// the record they wait for.
func headRef(ent *guardEntry) string {
	if ent.Head != "" || len(ent.Parked) == 0 {
		return ent.Head
	}
	return ent.Parked[0]
}

// guardRoom reports whether p's guard may take one more entry for msg. At the limit it applies
// AtLimit: OrderingHalt halts p at msg; OrderingParkAll marks the partition overflowed (stored).
func (e *Engine[K, V]) guardRoom(p *partition, msg *eh.Message, j *Job) bool {
	g := p.guard
	if g.size < g.max {
		return true
	}
	if g.limitAt == msg.Offset {
		g.limitAt = -1
		return true // the operator released the halted record with dead-letter
	}
	switch g.atLimit {
	case eh.OrderingParkAll:
		marker := fmt.Sprintf("overflow:%s/%d@%d", p.key.Topic, p.key.Partition, msg.Offset)
		e.enqueueSave(p, []eh.OrderingRecord{{Key: []byte(guardOverflow), Value: []byte(marker)}}, nil)
		g.setOverflow(marker)
		e.log.Error("ordering guard full: every later record of the partition is parked until ClearOrdering",
			"topic", p.key.Topic, "partition", p.key.Partition, "offset", msg.Offset, "entries", g.size)
	default:
		g.limitAt = msg.Offset
		e.halt(p, msg, j.f, 0, eh.ReasonOrderingLimit)
	}
	return false
}

// setOverflow records the partition's overflow marker "overflow:topic/partition@offset".
func (g *guard) setOverflow(marker string) {
	g.overflow, g.overflowAt = marker, 0
	if i := strings.LastIndexByte(marker, '@'); i >= 0 {
		if off, err := strconv.ParseInt(marker[i+1:], 10, 64); err == nil {
			g.overflowAt = off
		}
	}
}

// markParked adds the parked record's references to its MPFE's metadata map.
func markParked(j *Job, headEvent, head string) {
	m := &j.meta
	if m.Headers == nil {
		m.Headers = headerMap(j.msg.Headers)
	}
	if headEvent != "" {
		m.Headers[avro.ParkedBehindEntry] = []byte(headEvent)
	}
	m.Headers[avro.ParkedHeadEntry] = []byte(head)
}

// clearGuard drops p's guard state, in the store too (ClearOrdering).
func (e *Engine[K, V]) clearGuard(p *partition) {
	g := p.guard
	for key, ent := range g.keys {
		var extra []eh.OrderingRecord
		for len(ent.Parked) > 0 {
			extra = append(extra, popParked(key, ent))
		}
		e.saveKey(p, key, nil, nil, extra...)
		delete(g.keys, key)
	}
	if g.overflow != "" {
		e.enqueueSave(p, []eh.OrderingRecord{{Key: []byte(guardOverflow)}}, nil)
	}
	g.overflow, g.size = "", 0
	e.log.Info("ordering guard cleared", "topic", p.key.Topic, "partition", p.key.Partition)
}

// resolveHeads applies the heads resolved by an operator: each key's head is treated as if its
// resend had been handled (the key is released, or freed when nothing is parked behind it).
func (e *Engine[K, V]) resolveHeads(p *partition) {
	g := p.guard
	g.resolveMu.Lock()
	keys := g.resolve
	g.resolve = nil
	g.resolving.Store(false)
	g.resolveMu.Unlock()
	for _, key := range keys {
		ent := g.keys[key]
		if ent == nil || ent.Head == "" {
			continue
		}
		head := ent.Head
		ent.Head = ""
		g.size--
		if ent.size() == 0 {
			delete(g.keys, key)
		}
		e.saveKey(p, key, ent, nil)
		e.log.Info("ordering guard: head resolved by an operator; its parked records are handed over when they are resent",
			"topic", p.key.Topic, "partition", p.key.Partition, "head", head, "parked", len(ent.Parked))
	}
}

// ResolveOrdering resolves the head failure of key on topic/partition as if its resend had been
// handled: the records parked behind it are handed over, in their order, when they are resent.
// An operator uses it to give up on a head (closed at the service). It takes effect before the
// partition's next record; eh.ErrNotAssigned when the partition is not assigned here or not
// guarded.
func (e *Engine[K, V]) ResolveOrdering(_ context.Context, topic string, partition int32, key []byte) error {
	e.partsMu.RLock()
	p := e.parts[TP{Topic: topic, Partition: partition}]
	e.partsMu.RUnlock()
	if p == nil || p.guard == nil {
		return eh.ErrNotAssigned
	}
	g := p.guard
	g.resolveMu.Lock()
	g.resolve = append(g.resolve, string(key))
	g.resolving.Store(true)
	g.resolveMu.Unlock()
	return nil
}

// ClearOrdering drops the ordering guard's state of topic/partition (its parked keys and an
// overflow): the partition's later records are handed over again. It takes effect before the
// partition's next record. It returns eh.ErrNotAssigned when the partition is not assigned
// here or not guarded.
func (e *Engine[K, V]) ClearOrdering(_ context.Context, topic string, partition int32) error {
	e.partsMu.RLock()
	p := e.parts[TP{Topic: topic, Partition: partition}]
	e.partsMu.RUnlock()
	if p == nil || p.guard == nil {
		return eh.ErrNotAssigned
	}
	p.guard.clear.Store(true)
	return nil
}
