package api

import (
	"net/http"
	"time"
)

// statsJSON is the body of GET /stats.
type statsJSON struct {
	// AsOf is when the counts were taken; they are at most about StatsMaxAge old.
	AsOf               time.Time        `json:"as_of"`
	Total              int64            `json:"total"`
	ByState            map[string]int64 `json:"by_state"`
	ByTemporality      map[string]int64 `json:"by_temporality"`
	ByTopic            map[string]int64 `json:"by_topic"`
	ByPublisherService map[string]int64 `json:"by_publisher_service"`
	// OldestPending is the oldest RETRY_PENDING failure; null when none.
	OldestPending *oldestJSON `json:"oldest_pending"`
	// OldestPermanent is the oldest PERMANENT failure; null when none.
	OldestPermanent *oldestJSON `json:"oldest_permanent"`
}

type oldestJSON struct {
	CreatedAt  time.Time `json:"created_at"`
	AgeSeconds float64   `json:"age_seconds"`
}

// getStats serves GET /stats.
func (a *api) getStats(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		a.fail(w, r, err)
		return
	}
	st, err := a.core.Stats(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	now := a.cfg.Now()
	out := statsJSON{
		AsOf: st.AsOf, Total: st.Total,
		ByState:            make(map[string]int64, len(st.ByState)),
		ByTemporality:      make(map[string]int64, len(st.ByTemporality)),
		ByTopic:            st.ByTopic,
		ByPublisherService: st.ByPublisherService,
	}
	for k, v := range st.ByState {
		out.ByState[string(k)] = v
	}
	for k, v := range st.ByTemporality {
		out.ByTemporality[string(k)] = v
	}
	oldest := func(t *time.Time) *oldestJSON {
		if t == nil {
			return nil
		}
		return &oldestJSON{CreatedAt: *t, AgeSeconds: max(0, now.Sub(*t).Seconds())}
	}
	out.OldestPending, out.OldestPermanent = oldest(st.OldestPending), oldest(st.OldestPermanent)
	writeJSON(w, http.StatusOK, out)
}
