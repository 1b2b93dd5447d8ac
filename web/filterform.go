package web

import (
	"net/url"
	"strings"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/operator"
)

// filterForm is the list page's filter form: the filter's values, as operator.FilterValues
// writes them, for re-display. operator.ParseFilter reads the submitted form.
type filterForm struct {
	States        map[redrive.State]bool
	Temporalities map[avro.Temporality]bool
	Topic         string
	Service       string
	MessageType   string
	ErrorCode     string
	Group         string
	Search        string
	// Key is the key as text; KeyBase64 the key in base64 when it is not printable text.
	Key       string
	KeyBase64 string
	From, To  string

	// The advanced criteria. KeyPrefixBase64 and PayloadBase64 hold bytes that are not
	// printable text.
	KeyPrefix       string
	KeyPrefixBase64 string
	EventID         string
	IdempotenceID   string
	CausingEventID  string
	TraceID         string
	Header          string
	StackTraceHash  string
	Ticket          string
	NoTicket        bool
	Payload         string
	PayloadBase64   string
	// PayloadField is a JSON pointer over the decoded value; PayloadFieldValue and
	// PayloadFieldContains compare the field's value.
	PayloadField         string
	PayloadFieldValue    string
	PayloadFieldContains string
	SourceFormats        map[redrive.SourceFormat]bool
	SourceTopic          string
	// Clusters are the Kafka clusters checked.
	Clusters map[string]bool
	// Advanced is true when an advanced criterion is set: the section is shown open.
	Advanced bool
}

// advancedParams are the filter parameters of the form's advanced section.
var advancedParams = []string{
	operator.ParamKeyPrefix, operator.ParamKeyPrefixB64, operator.ParamEventID, operator.ParamIdempotenceID,
	operator.ParamCausingEventID, operator.ParamTraceID, operator.ParamHeader, operator.ParamStackTraceHash,
	operator.ParamTicket, operator.ParamNoTicket, operator.ParamPayload, operator.ParamPayloadB64,
	operator.ParamPayloadField, operator.ParamPayloadFieldValue, operator.ParamPayloadFieldContains, operator.ParamSourceFormat, operator.ParamSourceTopic,
}

// sourceFormats lists the source formats, for the form.
var sourceFormats = []redrive.SourceFormat{redrive.SourceMPFE, redrive.SourceSpring, redrive.SourceConnect, redrive.SourceStreams, redrive.SourceRaw}

func newFilterForm(f redrive.Filter) filterForm { return formFromValues(operator.FilterValues(f)) }

// formFromValues fills the form from filter values: those FilterValues wrote, or those a user
// submitted when the core refused them (shown back as they were, with the core's reason).
func formFromValues(v url.Values) filterForm {
	ff := filterForm{
		States:          map[redrive.State]bool{},
		Temporalities:   map[avro.Temporality]bool{},
		SourceFormats:   map[redrive.SourceFormat]bool{},
		Clusters:        map[string]bool{},
		Topic:           v.Get(operator.ParamTopic),
		Service:         v.Get(operator.ParamPublisherSvc),
		MessageType:     v.Get(operator.ParamMessageType),
		ErrorCode:       v.Get(operator.ParamErrorCode),
		Group:           v.Get(operator.ParamGroupID),
		Search:          v.Get(operator.ParamSearch),
		Key:             v.Get(operator.ParamKey),
		KeyBase64:       v.Get(operator.ParamKeyBase64),
		KeyPrefix:       v.Get(operator.ParamKeyPrefix),
		KeyPrefixBase64: v.Get(operator.ParamKeyPrefixB64),
		EventID:         v.Get(operator.ParamEventID),
		IdempotenceID:   v.Get(operator.ParamIdempotenceID),
		CausingEventID:  v.Get(operator.ParamCausingEventID),
		TraceID:         v.Get(operator.ParamTraceID),
		Header:          v.Get(operator.ParamHeader),
		StackTraceHash:  v.Get(operator.ParamStackTraceHash),
		Ticket:          v.Get(operator.ParamTicket),
		NoTicket:        v.Get(operator.ParamNoTicket) == "true",
		Payload:         v.Get(operator.ParamPayload),
		PayloadBase64:   v.Get(operator.ParamPayloadB64),
		SourceTopic:     v.Get(operator.ParamSourceTopic),

		PayloadField:         v.Get(operator.ParamPayloadField),
		PayloadFieldValue:    v.Get(operator.ParamPayloadFieldValue),
		PayloadFieldContains: v.Get(operator.ParamPayloadFieldContains),
		From:                 formTime(v.Get(operator.ParamCreatedFrom)),
		To:                   formTime(v.Get(operator.ParamCreatedTo)),
	}
	for _, s := range operator.SplitValues(v[operator.ParamState]) {
		ff.States[redrive.State(strings.ToUpper(s))] = true
	}
	for _, t := range operator.SplitValues(v[operator.ParamTemporality]) {
		ff.Temporalities[avro.Temporality(strings.ToUpper(t))] = true
	}
	for _, sf := range operator.SplitValues(v[operator.ParamSourceFormat]) {
		ff.SourceFormats[redrive.SourceFormat(strings.ToLower(sf))] = true
	}
	for _, c := range operator.SplitValues(v[operator.ParamCluster]) {
		ff.Clusters[c] = true
	}
	for _, p := range advancedParams {
		if v.Get(p) != "" {
			ff.Advanced = true
		}
	}
	return ff
}

// formTime writes a time parameter for a datetime-local field, which takes UTC without a
// zone; a value that does not parse is kept as it was given.
func formTime(s string) string {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC().Format("2006-01-02T15:04:05")
	}
	return s
}
