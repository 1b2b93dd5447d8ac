package api

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// filterParams are the query parameters (and JSON members of a bulk filter) that build a
// store.Filter. state and temporality may repeat, or hold comma-separated values.
var filterParams = []string{
	"state", "temporality", "topic", "publisher_system", "publisher_service", "error_code",
	"message_type", "group_id", "key", "key_base64", "q", "created_from", "created_to",
}

// listParams are the query parameters of GET /failures besides the filter.
var listParams = []string{"sort", "limit", "cursor"}

// parseQuery parses the query string of r strictly (a malformed pair, e.g. one with a
// semicolon, is an error rather than dropped) and answers 400 for a parameter not in allowed,
// and for one given more than once unless it may repeat.
func parseQuery(r *http.Request, repeatable map[string]bool, allowed ...[]string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("query", "malformed query string: %s", err.Error())
	}
	known := map[string]bool{}
	for _, list := range allowed {
		for _, name := range list {
			known[name] = true
		}
	}
	for name, vs := range q {
		if !known[name] {
			if name == "" {
				return nil, badRequest("query", "a parameter without a name")
			}
			return nil, badRequest(truncate(name, 40), "unknown query parameter")
		}
		if len(vs) > 1 && !repeatable[name] {
			return nil, badRequest(name, "given %d times, at most once", len(vs))
		}
	}
	return q, nil
}

// filterInput is a filter as a client gives it, from a query string or a JSON object.
type filterInput struct {
	State           stringList `json:"state"`
	Temporality     stringList `json:"temporality"`
	Topic           string     `json:"topic"`
	PublisherSystem string     `json:"publisher_system"`
	PublisherSvc    string     `json:"publisher_service"`
	ErrorCode       string     `json:"error_code"`
	MessageType     string     `json:"message_type"`
	GroupID         *int64     `json:"group_id"`
	Key             *string    `json:"key"`
	KeyBase64       *string    `json:"key_base64"`
	Q               string     `json:"q"`
	CreatedFrom     string     `json:"created_from"`
	CreatedTo       string     `json:"created_to"`
}

// filterFromQuery reads the filter parameters of q. An empty value counts as absent.
func filterFromQuery(q url.Values) (store.Filter, error) {
	in := filterInput{
		State:           splitValues(q["state"]),
		Temporality:     splitValues(q["temporality"]),
		Topic:           q.Get("topic"),
		PublisherSystem: q.Get("publisher_system"),
		PublisherSvc:    q.Get("publisher_service"),
		ErrorCode:       q.Get("error_code"),
		MessageType:     q.Get("message_type"),
		Q:               q.Get("q"),
		CreatedFrom:     q.Get("created_from"),
		CreatedTo:       q.Get("created_to"),
	}
	if s := q.Get("group_id"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return store.Filter{}, badRequest("group_id", "%q is not a group id (a positive integer)", truncate(s, 40))
		}
		in.GroupID = &id
	}
	if s := q.Get("key"); s != "" {
		in.Key = &s
	}
	if s := q.Get("key_base64"); s != "" {
		in.KeyBase64 = &s
	}
	return in.filter()
}

// splitValues splits comma-separated values and drops empty ones.
func splitValues(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// filter validates in and returns the store filter.
func (in *filterInput) filter() (store.Filter, error) {
	f := store.Filter{
		Topic:            in.Topic,
		PublisherSystem:  in.PublisherSystem,
		PublisherService: in.PublisherSvc,
		ErrorCode:        in.ErrorCode,
		MessageType:      in.MessageType,
		Search:           in.Q,
	}
	for _, s := range in.State {
		f.States = append(f.States, store.State(strings.ToUpper(s)))
	}
	for _, t := range in.Temporality {
		f.Temporalities = append(f.Temporalities, avro.Temporality(strings.ToUpper(t)))
	}
	if len(f.States) > 4 || len(f.Temporalities) > 3 {
		return store.Filter{}, badRequest("state", "too many values")
	}
	if in.GroupID != nil {
		if *in.GroupID <= 0 {
			return store.Filter{}, badRequest("group_id", "must be a positive integer")
		}
		f.GroupID = *in.GroupID
	}
	switch {
	case in.Key != nil && in.KeyBase64 != nil:
		return store.Filter{}, badRequest("key_base64", "give key or key_base64, not both")
	case in.Key != nil:
		f.Key = []byte(*in.Key)
	case in.KeyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.KeyBase64)
		if err != nil {
			b, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(*in.KeyBase64, "="))
		}
		if err != nil {
			return store.Filter{}, badRequest("key_base64", "not base64")
		}
		f.Key = b
	}
	var err error
	if f.CreatedFrom, err = parseTime("created_from", in.CreatedFrom); err != nil {
		return store.Filter{}, err
	}
	if f.CreatedTo, err = parseTime("created_to", in.CreatedTo); err != nil {
		return store.Filter{}, err
	}
	if err := f.Validate(); err != nil {
		return store.Filter{}, err
	}
	return f, nil
}

// parseTime parses an RFC 3339 time; "" is the zero time.
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badRequest(field, "%q is not an RFC 3339 time such as 2024-05-01T12:00:00Z", truncate(s, 40))
	}
	return t, nil
}

// stringList is a JSON string or array of strings.
type stringList []string

// UnmarshalJSON accepts "a", "a,b" or ["a", "b"]; null is an empty list.
func (l *stringList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = splitValues([]string{one})
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		// The decoder adds the member's name to an *UnmarshalTypeError.
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeOf(many)}
	}
	*l = many
	return nil
}

// truncate shortens a client-given value quoted in an error message.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// parseLimit reads the limit parameter: default def, at most store.MaxListLimit.
func parseLimit(q url.Values, def int) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > store.MaxListLimit {
		return 0, badRequest("limit", "%q is not an integer from 1 to %d", truncate(s, 20), store.MaxListLimit)
	}
	return n, nil
}

// parseSort reads the sort parameter: newest (default) or oldest.
func parseSort(q url.Values) (store.Order, error) {
	switch s := q.Get("sort"); s {
	case "", "newest":
		return store.NewestFirst, nil
	case "oldest":
		return store.OldestFirst, nil
	default:
		return 0, badRequest("sort", "%q is not newest or oldest", truncate(s, 20))
	}
}

// describeFilter returns the filter as JSON-ready values, for audit details.
func describeFilter(in *filterInput) map[string]any {
	b, _ := json.Marshal(in)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k, v := range m {
		if v == nil || v == "" {
			delete(m, k)
		}
	}
	return m
}

// jsonKind names the kind of a JSON value, for type errors.
func jsonKind(b []byte) string {
	switch s := strings.TrimSpace(string(b)); {
	case s == "":
		return "nothing"
	case s[0] == '{':
		return "object"
	case s[0] == '[':
		return "array"
	case s[0] == '"':
		return "string"
	case s == "true" || s == "false":
		return "bool"
	}
	return "number"
}
