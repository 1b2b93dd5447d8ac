package web

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// Filter parameters in a URL (and in the list page's form). They match the API's query
// parameters, so a filtered list's address reads the same in both.
const (
	paramState       = "state"             // repeatable: RETRY_PENDING, PERMANENT, RESENT, CLOSED
	paramTemporality = "temporality"       // repeatable: TEMPORARY, PERMANENT, UNKNOWN
	paramTopic       = "topic"             // exact
	paramService     = "publisher_service" // exact
	paramType        = "message_type"      // exact
	paramCode        = "error_code"        // exact
	paramGroup       = "group_id"          // a group id
	paramSearch      = "q"                 // substring of the error message, any case
	paramKey         = "key"               // the original key, exactly, as UTF-8 text
	paramFrom        = "created_from"      // received at or after (RFC 3339, or YYYY-MM-DDTHH:MM in UTC)
	paramTo          = "created_to"        // received before
	paramCursor      = "cursor"            // the next page's position
)

// filterParams lists the filter parameters, in the order links write them.
var filterParams = []string{paramState, paramTemporality, paramTopic, paramService, paramType, paramCode,
	paramGroup, paramSearch, paramKey, paramFrom, paramTo}

// maxFilterText bounds a text criterion, in bytes.
const maxFilterText = 1000

// temporalities lists the temporalities, for the filter form.
var temporalities = []avro.Temporality{avro.Temporary, avro.Permanent, avro.Unknown}

// ParseFilter reads a Filter from URL query (or form) values; the error, wrapping ErrInvalid,
// names the parameter at fault.
func ParseFilter(v url.Values) (Filter, error) {
	var f Filter
	bad := func(param, format string, args ...any) (Filter, error) {
		return Filter{}, fmt.Errorf("%w: %s: %s", ErrInvalid, param, fmt.Sprintf(format, args...))
	}
	for _, s := range v[paramState] {
		if s == "" {
			continue
		}
		st := store.State(s)
		if !st.Valid() {
			return bad(paramState, "%q is not a state", clip(s))
		}
		if !slices.Contains(f.States, st) {
			f.States = append(f.States, st)
		}
	}
	for _, s := range v[paramTemporality] {
		if s == "" {
			continue
		}
		t := avro.Temporality(s)
		if !t.Valid() {
			return bad(paramTemporality, "%q is not a temporality", clip(s))
		}
		if !slices.Contains(f.Temporalities, t) {
			f.Temporalities = append(f.Temporalities, t)
		}
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{
		{paramTopic, &f.Topic}, {paramService, &f.PublisherService}, {paramType, &f.MessageType},
		{paramCode, &f.ErrorCode}, {paramSearch, &f.Search}, {paramKey, &f.Key},
	} {
		s := v.Get(p.name)
		if p.name != paramKey {
			s = strings.TrimSpace(s)
		}
		switch {
		case len(s) > maxFilterText:
			return bad(p.name, "%d bytes, at most %d", len(s), maxFilterText)
		case !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0:
			return bad(p.name, "not valid text")
		}
		*p.dst = s
	}
	if s := strings.TrimSpace(v.Get(paramGroup)); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return bad(paramGroup, "%q is not a group id", clip(s))
		}
		f.GroupID = id
	}
	var err error
	if f.From, err = parseTime(v.Get(paramFrom)); err != nil {
		return bad(paramFrom, "%v", err)
	}
	if f.To, err = parseTime(v.Get(paramTo)); err != nil {
		return bad(paramTo, "%v", err)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return bad(paramTo, "must be after %s", paramFrom)
	}
	return f, nil
}

// parseTime accepts RFC 3339 and the datetime-local form of browsers (taken as UTC).
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2006-01-02T15:04, UTC, or RFC 3339)", clip(s))
}

// Values returns the URL form of f, which ParseFilter reads back.
func (f Filter) Values() url.Values {
	v := url.Values{}
	for _, s := range f.States {
		v.Add(paramState, string(s))
	}
	for _, t := range f.Temporalities {
		v.Add(paramTemporality, string(t))
	}
	for _, p := range []struct{ name, value string }{
		{paramTopic, f.Topic}, {paramService, f.PublisherService}, {paramType, f.MessageType},
		{paramCode, f.ErrorCode}, {paramSearch, f.Search}, {paramKey, f.Key},
	} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	if f.GroupID != 0 {
		v.Set(paramGroup, strconv.FormatInt(f.GroupID, 10))
	}
	if !f.From.IsZero() {
		v.Set(paramFrom, f.From.UTC().Format(time.RFC3339))
	}
	if !f.To.IsZero() {
		v.Set(paramTo, f.To.UTC().Format(time.RFC3339))
	}
	return v
}

// IsZero reports whether f selects every failure.
func (f Filter) IsZero() bool { return len(f.Values()) == 0 }

// clip shortens a user-given value quoted back in a message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// filterForm is the list page's filter form: the values as typed, for re-display.
type filterForm struct {
	States        map[store.State]bool
	Temporalities map[avro.Temporality]bool
	Topic         string
	Service       string
	MessageType   string
	ErrorCode     string
	Group         string
	Search        string
	Key           string
	From, To      string
}

func newFilterForm(f Filter) filterForm {
	ff := filterForm{
		States:        map[store.State]bool{},
		Temporalities: map[avro.Temporality]bool{},
		Topic:         f.Topic,
		Service:       f.PublisherService,
		MessageType:   f.MessageType,
		ErrorCode:     f.ErrorCode,
		Search:        f.Search,
		Key:           f.Key,
	}
	for _, s := range f.States {
		ff.States[s] = true
	}
	for _, t := range f.Temporalities {
		ff.Temporalities[t] = true
	}
	if f.GroupID != 0 {
		ff.Group = strconv.FormatInt(f.GroupID, 10)
	}
	if !f.From.IsZero() {
		ff.From = f.From.UTC().Format("2006-01-02T15:04:05")
	}
	if !f.To.IsZero() {
		ff.To = f.To.UTC().Format("2006-01-02T15:04:05")
	}
	return ff
}
