package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redrive/redrive/avro"
)

// OpenFailures counts the open failures by temporality, original topic and publisher service,
// from an index-only scan of failure_not_resent_group_idx.
func (s *Store) OpenFailures(ctx context.Context) (*OpenBreakdown, error) {
	b := &OpenBreakdown{
		ByTemporality:      map[avro.Temporality]int64{avro.Temporary: 0, avro.Permanent: 0, avro.Unknown: 0},
		ByTopic:            map[string]int64{},
		ByPublisherService: map[string]int64{},
	}
	rows, err := s.pool.Query(ctx, `
		SELECT c.temporality, c.original_topic, g.publisher_service, sum(c.n)::bigint
		FROM (SELECT group_id, temporality, original_topic, count(*) AS n FROM failure_not_resent
		      WHERE state IN ('RETRY_PENDING', 'PERMANENT') GROUP BY group_id, temporality, original_topic) c
		JOIN failure_groups g ON g.id = c.group_id
		GROUP BY c.temporality, c.original_topic, g.publisher_service`)
	if err != nil {
		return nil, fmt.Errorf("open failures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			t          avro.Temporality
			topic, svc string
			n          int64
		)
		if err := rows.Scan(&t, &topic, &svc, &n); err != nil {
			return nil, fmt.Errorf("open failures: %w", err)
		}
		b.Total += n
		b.ByTemporality[t] += n
		b.ByTopic[topic] += n
		b.ByPublisherService[svc] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open failures: %w", err)
	}
	return b, nil
}

// maxTimeBuckets bounds the buckets of one FailuresOverTime call.
const maxTimeBuckets = 10000

// FailuresOverTime counts the failures stored from since until now in buckets of width that
// start at since, oldest first; empty buckets are left out.
func (s *Store) FailuresOverTime(ctx context.Context, since time.Time, width time.Duration) ([]TimeBucket, error) {
	switch {
	case width < time.Second:
		return nil, errors.New("failures over time: the bucket width is below one second")
	case s.now().Sub(since)/width > maxTimeBuckets:
		return nil, fmt.Errorf("failures over time: more than %d buckets", maxTimeBuckets)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT date_bin($1::bigint * interval '1 microsecond', created_at, $2), count(*)
		FROM failure_states WHERE created_at >= $2
		GROUP BY 1 ORDER BY 1`, width.Microseconds(), since)
	if err != nil {
		return nil, fmt.Errorf("failures over time: %w", err)
	}
	defer rows.Close()
	out := []TimeBucket{}
	for rows.Next() {
		var b TimeBucket
		if err := rows.Scan(&b.Start, &b.Count); err != nil {
			return nil, fmt.Errorf("failures over time: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failures over time: %w", err)
	}
	return out, nil
}
