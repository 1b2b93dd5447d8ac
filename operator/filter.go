package operator

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/internal/clip"
)

// Filter parameters, as URL query parameters, form fields and JSON members. state and
// temporality may repeat or hold comma-separated values; an empty value counts as absent.
const (
	ParamState           = "state"             // RETRY_PENDING, PERMANENT, RESENT, CLOSED (any case)
	ParamTemporality     = "temporality"       // TEMPORARY, PERMANENT, UNKNOWN (any case)
	ParamTopic           = "topic"             // the original topic, exactly
	ParamPublisherSystem = "publisher_system"  // exactly
	ParamPublisherSvc    = "publisher_service" // exactly
	ParamErrorCode       = "error_code"        // exactly
	ParamMessageType     = "message_type"      // exactly
	ParamGroupID         = "group_id"          // a positive integer
	ParamKey             = "key"               // the original key, exactly, as UTF-8 text
	ParamKeyBase64       = "key_base64"        // the original key, exactly, in base64
	ParamSearch          = "q"                 // substring of the error message, any case
	ParamCreatedFrom     = "created_from"      // stored at or after (RFC 3339, or 2006-01-02T15:04 in UTC)
	ParamCreatedTo       = "created_to"        // stored before
	ParamKeyPrefix       = "key_prefix"        // the original key starts with this UTF-8 text
	ParamKeyPrefixB64    = "key_prefix_base64" // the original key starts with these bytes, in base64
	ParamEventID         = "event_id"          // the MPFE's event id, exactly
	ParamIdempotenceID   = "idempotence_id"    // the MPFE's idempotence id, exactly
	ParamCausingEventID  = "causing_event_id"  // the failed message's id (its causing message), exactly
	ParamTraceID         = "trace_id"          // the W3C trace id of the traceparent header
	ParamHeader          = "header"            // NAME (a header of that name) or NAME=VALUE (UTF-8 text)
	ParamStackTraceHash  = "stack_trace_hash"  // exactly
	ParamTicket          = "ticket"            // the group's ticket, exactly
	ParamNoTicket        = "no_ticket"         // true: groups without a ticket
	ParamPayload         = "payload"           // the original value contains this UTF-8 text (bounded, see redrive.Filter.Payload)
	ParamPayloadB64      = "payload_base64"    // the original value contains these bytes, in base64
	// ParamPayloadField is a JSON pointer over the decoded, masked value (redrive.ParsePayloadPointer):
	// alone, the field is present; ParamPayloadFieldValue and ParamPayloadFieldContains compare
	// its value (bounded, see redrive.Filter.PayloadField).
	ParamPayloadField         = "payload_field"
	ParamPayloadFieldValue    = "payload_field_value"    // the field's value is exactly this text
	ParamPayloadFieldContains = "payload_field_contains" // the field's value contains this text
	ParamSourceFormat         = "source_format"          // repeatable: mpfe, spring, connect, streams, raw
	ParamSourceTopic          = "source_topic"           // the topic the failure was read from, exactly
	ParamCluster              = "cluster"                // repeatable: the Kafka cluster the failure was read from
)

// FilterParams lists the filter parameters in the order FilterValues writes them.
var FilterParams = []string{
	ParamState, ParamTemporality, ParamTopic, ParamPublisherSystem, ParamPublisherSvc, ParamErrorCode,
	ParamMessageType, ParamGroupID, ParamKey, ParamKeyBase64, ParamSearch, ParamCreatedFrom, ParamCreatedTo,
	ParamKeyPrefix, ParamKeyPrefixB64, ParamEventID, ParamIdempotenceID, ParamCausingEventID, ParamTraceID,
	ParamHeader, ParamStackTraceHash, ParamTicket, ParamNoTicket, ParamPayload, ParamPayloadB64,
	ParamPayloadField, ParamPayloadFieldValue, ParamPayloadFieldContains, ParamSourceFormat, ParamSourceTopic, ParamCluster,
}

// Repeatable reports whether a filter parameter may be given more than once.
func Repeatable(param string) bool {
	return param == ParamState || param == ParamTemporality || param == ParamSourceFormat || param == ParamCluster
}

// ParseFilter reads a filter from URL query or form values: the one parser of filters, for
// the API's query strings, its JSON bodies (through FilterInput) and the UI's forms. Names
// that are not filter parameters are ignored (the caller checks for unknown ones); the error
// is an *InputError naming the parameter at fault.
func ParseFilter(v url.Values) (redrive.Filter, error) {
	var (
		f   redrive.Filter
		err error
	)
	if f.States, err = parseEnums(v[ParamState], ParamState, strings.ToUpper, redrive.State.Valid, "a state (RETRY_PENDING, PERMANENT, RESENT, CLOSED)"); err != nil {
		return redrive.Filter{}, err
	}
	if f.Temporalities, err = parseEnums(v[ParamTemporality], ParamTemporality, strings.ToUpper, avro.Temporality.Valid, "a temporality (TEMPORARY, PERMANENT, UNKNOWN)"); err != nil {
		return redrive.Filter{}, err
	}
	if f.SourceFormats, err = parseEnums(v[ParamSourceFormat], ParamSourceFormat, strings.ToLower, redrive.SourceFormat.Valid, "a source format (mpfe, spring, connect, streams, raw)"); err != nil {
		return redrive.Filter{}, err
	}
	f.SourceTopic = strings.TrimSpace(v.Get(ParamSourceTopic))
	validCluster := func(c string) bool { return redrive.ValidateClusterName(c) == nil }
	if f.Clusters, err = parseEnums(v[ParamCluster], ParamCluster, strings.TrimSpace, validCluster, "a cluster name (lower-case letters, digits, '-' and '_')"); err != nil {
		return redrive.Filter{}, err
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{
		{ParamTopic, &f.Topic}, {ParamPublisherSystem, &f.PublisherSystem}, {ParamPublisherSvc, &f.PublisherService},
		{ParamErrorCode, &f.ErrorCode}, {ParamMessageType, &f.MessageType}, {ParamSearch, &f.Search},
	} {
		*p.dst = strings.TrimSpace(v.Get(p.name))
	}
	if s := strings.TrimSpace(v.Get(ParamGroupID)); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return redrive.Filter{}, invalid(ParamGroupID, "%q is not a group id (a positive integer)", clip.Text(s, clip.Default))
		}
		f.GroupID = id
	}
	key, keyB64 := v.Get(ParamKey), v.Get(ParamKeyBase64)
	switch {
	case key != "" && keyB64 != "":
		return redrive.Filter{}, invalid(ParamKeyBase64, "give key or key_base64, not both")
	case key != "":
		f.Key = []byte(key)
	case keyB64 != "":
		b, err := base64.StdEncoding.DecodeString(keyB64)
		if err != nil {
			b, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(keyB64, "="))
		}
		if err != nil {
			return redrive.Filter{}, invalid(ParamKeyBase64, "not base64")
		}
		f.Key = b
	}
	if f.KeyPrefix, err = textOrBase64(v, ParamKeyPrefix, ParamKeyPrefixB64); err != nil {
		return redrive.Filter{}, err
	}
	if f.Payload, err = textOrBase64(v, ParamPayload, ParamPayloadB64); err != nil {
		return redrive.Filter{}, err
	}
	// The pointer and its terms are taken as given, spaces included: they compare exactly.
	f.PayloadField, f.PayloadFieldValue, f.PayloadFieldContains = v.Get(ParamPayloadField), v.Get(ParamPayloadFieldValue), v.Get(ParamPayloadFieldContains)
	for _, p := range []struct {
		name string
		dst  *string
	}{
		{ParamEventID, &f.EventID}, {ParamIdempotenceID, &f.IdempotenceID}, {ParamCausingEventID, &f.CausingMessage},
		{ParamTraceID, &f.TraceID}, {ParamStackTraceHash, &f.StackTraceHash}, {ParamTicket, &f.Ticket},
	} {
		*p.dst = strings.TrimSpace(v.Get(p.name))
	}
	f.TraceID = strings.ToLower(f.TraceID)
	if h := v.Get(ParamHeader); h != "" {
		name, value, hasValue := strings.Cut(h, "=")
		if f.HeaderName = strings.TrimSpace(name); f.HeaderName == "" {
			return redrive.Filter{}, invalid(ParamHeader, "%q names no header: give NAME or NAME=VALUE", clip.Text(h, clip.Default))
		}
		if hasValue {
			f.HeaderValue = []byte(value)
		}
	}
	if f.NoTicket, err = parseBool(v, ParamNoTicket); err != nil {
		return redrive.Filter{}, err
	}
	if f.CreatedFrom, err = parseTime(ParamCreatedFrom, v.Get(ParamCreatedFrom)); err != nil {
		return redrive.Filter{}, err
	}
	if f.CreatedTo, err = parseTime(ParamCreatedTo, v.Get(ParamCreatedTo)); err != nil {
		return redrive.Filter{}, err
	}
	if err := f.Validate(); err != nil {
		return redrive.Filter{}, fromStore(err)
	}
	return f, nil
}

// textOrBase64 reads bytes given as UTF-8 text in param or as base64 in b64param (not both);
// nil when neither is given.
func textOrBase64(v url.Values, param, b64param string) ([]byte, error) {
	text, b64 := v.Get(param), v.Get(b64param)
	switch {
	case text != "" && b64 != "":
		return nil, invalid(b64param, "give %s or %s, not both", param, b64param)
	case text != "":
		return []byte(text), nil
	case b64 != "":
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			b, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(b64, "="))
		}
		if err != nil {
			return nil, invalid(b64param, "not base64")
		}
		return b, nil
	}
	return nil, nil
}

// parseEnums reads the distinct values of a list parameter, each normalised by norm, naming the
// first that is not what (valid reports which are).
func parseEnums[T ~string](vs []string, param string, norm func(string) string, valid func(T) bool, what string) ([]T, error) {
	var out []T
	for _, s := range SplitValues(vs) {
		x := T(norm(s))
		if !valid(x) {
			return nil, invalid(param, "%q is not %s", clip.Text(s, clip.Default), what)
		}
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out, nil
}

// SplitValues splits repeated, comma-separated values (a list parameter) and drops empty ones.
func SplitValues(vs []string) []string {
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

// timeLayouts are the accepted time forms: RFC 3339, and a browser's datetime-local (UTC).
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseTime parses a time parameter; "" is the zero time.
func parseTime(field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, invalid(field, "%q is not a time: use RFC 3339 such as 2024-05-01T12:00:00Z (or 2024-05-01T12:00, taken as UTC)", clip.Text(s, clip.Default))
}

// FilterValues returns the URL form of f, which ParseFilter reads back: for links, forms and
// audit details. A key that is printable UTF-8 is written as key, any other as key_base64.
func FilterValues(f redrive.Filter) url.Values {
	v := url.Values{}
	for _, s := range f.States {
		v.Add(ParamState, string(s))
	}
	for _, t := range f.Temporalities {
		v.Add(ParamTemporality, string(t))
	}
	for _, sf := range f.SourceFormats {
		v.Add(ParamSourceFormat, string(sf))
	}
	if f.SourceTopic != "" {
		v.Set(ParamSourceTopic, f.SourceTopic)
	}
	for _, c := range f.Clusters {
		v.Add(ParamCluster, c)
	}
	for _, p := range []struct{ name, value string }{
		{ParamTopic, f.Topic}, {ParamPublisherSystem, f.PublisherSystem}, {ParamPublisherSvc, f.PublisherService},
		{ParamErrorCode, f.ErrorCode}, {ParamMessageType, f.MessageType}, {ParamSearch, f.Search},
	} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	if f.GroupID != 0 {
		v.Set(ParamGroupID, strconv.FormatInt(f.GroupID, 10))
	}
	if f.Key != nil {
		if plainText(f.Key) && len(f.Key) > 0 && strings.TrimSpace(string(f.Key)) == string(f.Key) {
			v.Set(ParamKey, string(f.Key))
		} else {
			v.Set(ParamKeyBase64, base64.StdEncoding.EncodeToString(f.Key))
		}
	}
	setBytes(v, f.KeyPrefix, ParamKeyPrefix, ParamKeyPrefixB64)
	setBytes(v, f.Payload, ParamPayload, ParamPayloadB64)
	for _, p := range []struct{ name, value string }{
		{ParamPayloadField, f.PayloadField}, {ParamPayloadFieldValue, f.PayloadFieldValue}, {ParamPayloadFieldContains, f.PayloadFieldContains},
	} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	for _, p := range []struct{ name, value string }{
		{ParamEventID, f.EventID}, {ParamIdempotenceID, f.IdempotenceID}, {ParamCausingEventID, f.CausingMessage},
		{ParamTraceID, f.TraceID}, {ParamStackTraceHash, f.StackTraceHash}, {ParamTicket, f.Ticket},
	} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	if f.HeaderName != "" {
		h := f.HeaderName
		if f.HeaderValue != nil {
			h += "=" + string(f.HeaderValue)
		}
		v.Set(ParamHeader, h)
	}
	if f.NoTicket {
		v.Set(ParamNoTicket, "true")
	}
	if !f.CreatedFrom.IsZero() {
		v.Set(ParamCreatedFrom, f.CreatedFrom.UTC().Format(time.RFC3339Nano))
	}
	if !f.CreatedTo.IsZero() {
		v.Set(ParamCreatedTo, f.CreatedTo.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// setBytes writes b as text in param when it is plain text, else in base64 in b64param.
func setBytes(v url.Values, b []byte, param, b64param string) {
	switch {
	case b == nil || len(b) == 0:
	case plainText(b) && strings.TrimSpace(string(b)) == string(b):
		v.Set(param, string(b))
	default:
		v.Set(b64param, base64.StdEncoding.EncodeToString(b))
	}
}

// plainText reports whether b is UTF-8 without control or formatting characters.
func plainText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// FilterInput is a filter as a JSON object (the members are the filter parameters; state and
// temporality take a string, comma-separated or not, or an array of strings). Filter parses it
// with ParseFilter, so JSON and query strings follow one set of rules.
type FilterInput struct {
	State                StringList `json:"state,omitzero"`
	Temporality          StringList `json:"temporality,omitzero"`
	Topic                string     `json:"topic,omitzero"`
	PublisherSystem      string     `json:"publisher_system,omitzero"`
	PublisherSvc         string     `json:"publisher_service,omitzero"`
	ErrorCode            string     `json:"error_code,omitzero"`
	MessageType          string     `json:"message_type,omitzero"`
	GroupID              *int64     `json:"group_id,omitzero"`
	Key                  *string    `json:"key,omitzero"`
	KeyBase64            *string    `json:"key_base64,omitzero"`
	Q                    string     `json:"q,omitzero"`
	CreatedFrom          string     `json:"created_from,omitzero"`
	CreatedTo            string     `json:"created_to,omitzero"`
	KeyPrefix            string     `json:"key_prefix,omitzero"`
	KeyPrefixBase64      string     `json:"key_prefix_base64,omitzero"`
	EventID              string     `json:"event_id,omitzero"`
	IdempotenceID        string     `json:"idempotence_id,omitzero"`
	CausingEventID       string     `json:"causing_event_id,omitzero"`
	TraceID              string     `json:"trace_id,omitzero"`
	Header               string     `json:"header,omitzero"`
	StackTraceHash       string     `json:"stack_trace_hash,omitzero"`
	Ticket               string     `json:"ticket,omitzero"`
	NoTicket             bool       `json:"no_ticket,omitzero"`
	Payload              string     `json:"payload,omitzero"`
	PayloadBase64        string     `json:"payload_base64,omitzero"`
	PayloadField         string     `json:"payload_field,omitzero"`
	PayloadFieldValue    string     `json:"payload_field_value,omitzero"`
	PayloadFieldContains string     `json:"payload_field_contains,omitzero"`
	SourceFormat         StringList `json:"source_format,omitzero"`
	SourceTopic          string     `json:"source_topic,omitzero"`
	Cluster              StringList `json:"cluster,omitzero"`
}

// StringList is a JSON string or array of strings.
type StringList []string

// UnmarshalJSON accepts "a", "a,b" or ["a", "b"]; null is an empty list.
func (l *StringList) UnmarshalJSON(b []byte) error {
	switch t := bytes.TrimSpace(b); {
	case string(t) == "null":
		*l = nil
		return nil
	case len(t) > 0 && t[0] == '"':
		var one string
		if err := json.Unmarshal(t, &one); err != nil {
			return err
		}
		*l = StringList{one}
		return nil
	case len(t) > 0 && t[0] == '[':
		var many []string
		if err := json.Unmarshal(t, &many); err != nil {
			return errors.New("want a string or an array of strings")
		}
		*l = many
		return nil
	}
	return errors.New("want a string or an array of strings")
}

// Filter validates in and returns the filter it describes.
func (in *FilterInput) Filter() (redrive.Filter, error) {
	v := url.Values{}
	v[ParamState] = in.State
	v[ParamTemporality] = in.Temporality
	v[ParamSourceFormat] = in.SourceFormat
	v[ParamCluster] = in.Cluster
	for name, s := range map[string]string{
		ParamTopic: in.Topic, ParamPublisherSystem: in.PublisherSystem, ParamPublisherSvc: in.PublisherSvc,
		ParamErrorCode: in.ErrorCode, ParamMessageType: in.MessageType, ParamSearch: in.Q,
		ParamCreatedFrom: in.CreatedFrom, ParamCreatedTo: in.CreatedTo,
		ParamKeyPrefix: in.KeyPrefix, ParamKeyPrefixB64: in.KeyPrefixBase64, ParamEventID: in.EventID,
		ParamIdempotenceID: in.IdempotenceID, ParamCausingEventID: in.CausingEventID, ParamTraceID: in.TraceID,
		ParamHeader: in.Header, ParamStackTraceHash: in.StackTraceHash, ParamTicket: in.Ticket,
		ParamPayload: in.Payload, ParamPayloadB64: in.PayloadBase64, ParamSourceTopic: in.SourceTopic,
		ParamPayloadField: in.PayloadField, ParamPayloadFieldValue: in.PayloadFieldValue, ParamPayloadFieldContains: in.PayloadFieldContains,
	} {
		v.Set(name, s)
	}
	if in.NoTicket {
		v.Set(ParamNoTicket, "true")
	}
	if in.GroupID != nil {
		if *in.GroupID <= 0 {
			return redrive.Filter{}, invalid(ParamGroupID, "must be a positive integer")
		}
		v.Set(ParamGroupID, strconv.FormatInt(*in.GroupID, 10))
	}
	switch {
	case in.Key != nil && in.KeyBase64 != nil:
		return redrive.Filter{}, invalid(ParamKeyBase64, "give key or key_base64, not both")
	case in.Key != nil && *in.Key == "":
		return redrive.Filter{}, invalid(ParamKey, "empty: omit the member to match any key")
	case in.Key != nil:
		v.Set(ParamKey, *in.Key)
	case in.KeyBase64 != nil:
		v.Set(ParamKeyBase64, *in.KeyBase64)
	}
	return ParseFilter(v)
}
