package store

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/avro"
)

// FailureStats counts the failures by state, temporality, topic and publisher service in one
// statement (the service is the group's): the states other than RESENT from an index-only scan
// of failure_not_resent_group_idx, the totals from one of failure_states_group_counts_idx, and
// RESENT as the difference (migration 026). It finds the oldest RETRY_PENDING and PERMANENT
// failures through failure_not_resent_state_idx.
func (s *Store) FailureStats(ctx context.Context) (*Stats, error) {
	st := &Stats{
		ByState:            make(map[State]int64, len(States)),
		ByTemporality:      make(map[avro.Temporality]int64, 3),
		ByTopic:            map[string]int64{},
		ByPublisherService: map[string]int64{},
		AsOf:               s.now(),
	}
	for _, state := range States {
		st.ByState[state] = 0
	}
	for _, t := range []avro.Temporality{avro.Temporary, avro.Permanent, avro.Unknown} {
		st.ByTemporality[t] = 0
	}
	rows, err := s.pool.Query(ctx, `
		SELECT c.state, c.temporality, c.original_topic, g.publisher_service, sum(c.n)::bigint
		FROM (
			WITH held AS (
				SELECT group_id, state, temporality, original_topic, count(*) AS n FROM failure_not_resent
				GROUP BY group_id, state, temporality, original_topic
			), totals AS (
				SELECT group_id, temporality, original_topic, count(*) AS n FROM failure_states
				GROUP BY group_id, temporality, original_topic
			), resent AS (
				SELECT t.group_id, 'RESENT' AS state, t.temporality, t.original_topic, t.n - coalesce(h.n, 0) AS n
				FROM totals t
				LEFT JOIN (SELECT group_id, temporality, original_topic, sum(n) AS n FROM held
				           GROUP BY group_id, temporality, original_topic) h
				  ON h.group_id = t.group_id AND h.temporality = t.temporality AND h.original_topic = t.original_topic
			)
			SELECT * FROM held
			UNION ALL
			SELECT * FROM resent WHERE n > 0
		) c
		JOIN failure_groups g ON g.id = c.group_id
		GROUP BY c.state, c.temporality, c.original_topic, g.publisher_service`)
	if err != nil {
		return nil, fmt.Errorf("failure stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			state       State
			temporality avro.Temporality
			topic, svc  string
			n           int64
		)
		if err := rows.Scan(&state, &temporality, &topic, &svc, &n); err != nil {
			return nil, fmt.Errorf("failure stats: %w", err)
		}
		st.Total += n
		st.ByState[state] += n
		st.ByTemporality[temporality] += n
		st.ByTopic[topic] += n
		st.ByPublisherService[svc] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failure stats: %w", err)
	}
	err = s.pool.QueryRow(ctx, `
		SELECT (SELECT min(created_at) FROM failure_not_resent WHERE state = 'RETRY_PENDING'),
		       (SELECT min(created_at) FROM failure_not_resent WHERE state = 'PERMANENT')`).
		Scan(&st.OldestPending, &st.OldestPermanent)
	if err != nil {
		return nil, fmt.Errorf("failure stats: oldest: %w", err)
	}
	return st, nil
}
