package store

import (
	"slices"
	"strconv"
	"strings"
)

// sqlArgs collects the positional arguments of a statement being built.
type sqlArgs []any

// add appends v and returns its placeholder.
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// escapeLike escapes the LIKE wildcards of s (backslash is the default escape character).
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// whereClause joins conditions into a WHERE clause, or returns "" when there are none.
func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// keyPrefixExpr is the indexed expression of key prefix searches (migration 009): the first
// MaxKeyPrefix bytes of the key, short enough for a btree entry whatever the key's length.
const keyPrefixExpr = "substring(f.original_key from 1 for 256)"

// prefixSuccessor returns the smallest byte string greater than every string that starts with
// p, and false when there is none (p is all 0xff).
func prefixSuccessor(p []byte) ([]byte, bool) {
	next := append([]byte(nil), p...)
	for i := len(next) - 1; i >= 0; i-- {
		if next[i] < 0xff {
			next[i]++
			return next[:i+1], true
		}
	}
	return nil, false
}

// genericPlan reports whether f has only criteria whose plan does not depend on their values
// (states, temporalities, topics, services, codes, types, sources, group, time range, and
// the equality criteria below), so that a list may run the statement's generic plan
// (Store.searchQuery).
//
// The equality criteria on one indexed column (a key, an event, idempotence or causing id, a
// stack-trace hash, a ticket) plan the same way for every value: each names a few failures,
// and their index finds them. Their custom plans were the same, and planning them cost more
// than running them (5–20 ms against under 1 ms with ten partitions). The trace id is the
// exception: the generic plan does not trust its expression index's statistics and joins
// every state with its record (3.8 s at 1,000,000 failures).
func genericPlan(f *Filter) bool {
	return f.Search == "" && f.KeyPrefix == nil && f.TraceID == "" && f.HeaderName == "" && f.HeaderValue == nil && f.Payload == nil
}

// countSource is the relation a count of the failures that f (and, when any, one of states)
// selects reads: when every criterion of f is a column of the states (state, temporality,
// topic, group, ticket, time range), failure_not_resent if the failures are all of states other
// than RESENT (its indexes hold the state, migration 026), else failure_states; otherwise the
// failures view, which joins each state with its record.
func countSource(f *Filter, states ...State) string {
	if f.PublisherSystem == "" && f.PublisherService == "" && f.ErrorCode == "" && f.MessageType == "" &&
		len(f.SourceFormats) == 0 && f.SourceTopic == "" && len(f.Clusters) == 0 && f.Key == nil && f.Search == "" && f.KeyPrefix == nil &&
		f.EventID == "" && f.IdempotenceID == "" && f.CausingMessage == "" && f.TraceID == "" && f.HeaderName == "" &&
		f.HeaderValue == nil && f.StackTraceHash == "" && f.Payload == nil {
		if notResent(f.States) || notResent(states) {
			return "failure_not_resent"
		}
		return "failure_states"
	}
	return "failures"
}

// notResent reports whether states is not empty and holds no RESENT.
func notResent(states []State) bool {
	return len(states) > 0 && !slices.Contains(states, StateResent)
}

// stateDriven returns the relation in which a page of the failures that f selects is best
// found before its rows are joined with their records, or "" for none (the records, walked in
// created order, find it). failure_not_resent, when every criterion is one of its columns
// (countSource) and no state is RESENT: its indexes (its primary key, state or group, then
// created_at) give its rows in list order, and it holds only the failures not resent. The
// states, for one group of any state: their group index gives the group's states in order. A
// list of RESENT failures without a group walks the records (no index of the states holds
// the state; resent failures are most of them). Nor is a topic driven by either: the records'
// (topic, created) index finds its page, where these would read the rows of every topic.
func stateDriven(f *Filter) string {
	if f.Topic != "" {
		return ""
	}
	switch src := countSource(f); {
	case src == "failure_not_resent":
		return src
	case src == "failure_states" && f.GroupID != 0:
		return src
	}
	return ""
}

// conditions returns the SQL conditions of f on the failures table (aliased f), appending
// their arguments to args.
func conditions(f *Filter, args *sqlArgs) []string {
	var c []string
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, s := range f.States {
			states[i] = string(s)
		}
		if len(states) == 1 {
			c = append(c, "f.state = "+args.add(states[0]))
		} else {
			c = append(c, "f.state = ANY("+args.add(states)+"::text[])")
		}
	}
	if len(f.Temporalities) > 0 {
		ts := make([]string, len(f.Temporalities))
		for i, t := range f.Temporalities {
			ts[i] = string(t)
		}
		c = append(c, "f.temporality = ANY("+args.add(ts)+"::text[])")
	}
	for _, eq := range []struct{ column, value string }{
		{"f.original_topic", f.Topic}, {"f.publisher_system", f.PublisherSystem},
		{"f.publisher_service", f.PublisherService}, {"f.error_code", f.ErrorCode}, {"f.message_type", f.MessageType},
		{"f.source_topic", f.SourceTopic},
	} {
		if eq.value != "" {
			c = append(c, eq.column+" = "+args.add(eq.value))
		}
	}
	if len(f.SourceFormats) > 0 {
		fs := make([]string, len(f.SourceFormats))
		for i, sf := range f.SourceFormats {
			fs[i] = string(sf)
		}
		c = append(c, "f.source_format = ANY("+args.add(fs)+"::text[])")
		if !slices.Contains(f.SourceFormats, SourceMPFE) {
			// Only the foreign formats are indexed (failure_records_foreign_created_idx,
			// migration 024); saying so lets the generic plan use that index.
			c = append(c, "f.source_format <> 'mpfe'")
		}
	}
	if len(f.Clusters) > 0 {
		c = append(c, "f.cluster = ANY("+args.add(f.Clusters)+"::text[])")
	}
	if f.GroupID != 0 {
		c = append(c, "f.group_id = "+args.add(f.GroupID))
	}
	if f.Key != nil {
		// The key prefix index (keyPrefixExpr) finds the rows; the second condition is exact.
		k := args.add(f.Key)
		c = append(c, keyPrefixExpr+" = substring("+k+"::bytea from 1 for 256)", "f.original_key = "+k+"::bytea")
	}
	if f.Search != "" {
		c = append(c, "f.error_message ILIKE "+args.add("%"+escapeLike(f.Search)+"%"))
	}
	c = append(c, searchConditions(f, args)...)
	if !f.CreatedFrom.IsZero() {
		c = append(c, "f.created_at >= "+args.add(f.CreatedFrom))
	}
	if !f.CreatedTo.IsZero() {
		c = append(c, "f.created_at < "+args.add(f.CreatedTo))
	}
	return c
}

// searchConditions returns the SQL conditions of the search criteria of f.
func searchConditions(f *Filter, args *sqlArgs) []string {
	var c []string
	for _, eq := range []struct{ column, value string }{
		{"f.event_id", f.EventID}, {"f.causing_message", f.CausingMessage}, {"f.stack_trace_hash", f.StackTraceHash},
	} {
		if eq.value != "" {
			c = append(c, eq.column+" = "+args.add(eq.value))
		}
	}
	if f.IdempotenceID != "" {
		// The idempotence ids are indexed once, across partitions, in failure_keys, with the
		// failure's created_at: the executor then reads the one partition of that time.
		k := args.add(f.IdempotenceID)
		c = append(c, "f.id = (SELECT k.failure_id FROM failure_keys k WHERE k.idempotence_id = "+k+")",
			"f.created_at = (SELECT k.created_at FROM failure_keys k WHERE k.idempotence_id = "+k+")")
	}
	if f.KeyPrefix != nil {
		// The expression index keyPrefixExpr serves the range; the second condition is exact
		// for the prefix's own length.
		p := args.add(f.KeyPrefix)
		c = append(c, keyPrefixExpr+" >= "+p+"::bytea",
			"substring(f.original_key from 1 for "+args.add(len(f.KeyPrefix))+") = "+p+"::bytea")
		if next, ok := prefixSuccessor(f.KeyPrefix); ok {
			c = append(c, keyPrefixExpr+" < "+args.add(next)+"::bytea")
		}
	}
	if f.TraceID != "" {
		// The expression of failure_records_trace_id_idx (migration 024): the 32 hex digits
		// as a uuid.
		c = append(c, "redrive_trace_id(f.header_names, f.header_values)::uuid = "+args.add(f.TraceID)+"::uuid")
	}
	if f.HeaderName != "" {
		name := args.add(f.HeaderName)
		if f.HeaderValue == nil {
			c = append(c, "f.header_names @> ARRAY["+name+"::text]")
		} else {
			c = append(c, "f.header_names @> ARRAY["+name+"::text]",
				"EXISTS (SELECT 1 FROM unnest(f.header_names, f.header_values) AS h(n, v) WHERE h.n = "+name+" AND h.v = "+args.add(f.HeaderValue)+"::bytea)")
		}
	}
	if f.Ticket != "" {
		c = append(c, "f.group_id IN (SELECT g.id FROM failure_groups g WHERE g.ticket = "+args.add(f.Ticket)+")")
	}
	if f.NoTicket {
		c = append(c, "f.group_id IN (SELECT g.id FROM failure_groups g WHERE g.ticket IS NULL)")
	}
	if f.Payload != nil {
		c = append(c, "position("+args.add(f.Payload)+"::bytea in f.original_value) > 0")
	}
	return c
}

// sqlFilter returns a *FilterError on "payload_field" for a filter with a decoded field
// search: the store cannot decode payloads, and a criterion it would ignore must never widen
// a selection. The operator core matches the field itself over the candidates of the rest of
// the filter (Filter.SQLPart).
func sqlFilter(f *Filter) error {
	if f.PayloadField != "" || f.PayloadFieldValue != "" || f.PayloadFieldContains != "" {
		return &FilterError{Field: "payload_field", Detail: "a decoded field search is matched by the operator core, not by the store"}
	}
	return nil
}
