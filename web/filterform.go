package web

import (
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/store"
)

// filterForm is the list page's filter form: the filter's values, as operator.FilterValues
// writes them, for re-display. operator.ParseFilter reads the submitted form.
type filterForm struct {
	States        map[store.State]bool
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
}

func newFilterForm(f store.Filter) filterForm {
	v := operator.FilterValues(f)
	ff := filterForm{
		States:        map[store.State]bool{},
		Temporalities: map[avro.Temporality]bool{},
		Topic:         v.Get(operator.ParamTopic),
		Service:       v.Get(operator.ParamPublisherSvc),
		MessageType:   v.Get(operator.ParamMessageType),
		ErrorCode:     v.Get(operator.ParamErrorCode),
		Group:         v.Get(operator.ParamGroupID),
		Search:        v.Get(operator.ParamSearch),
		Key:           v.Get(operator.ParamKey),
		KeyBase64:     v.Get(operator.ParamKeyBase64),
	}
	for _, s := range f.States {
		ff.States[s] = true
	}
	for _, t := range f.Temporalities {
		ff.Temporalities[t] = true
	}
	// The form's datetime-local fields take UTC without a zone.
	if !f.CreatedFrom.IsZero() {
		ff.From = f.CreatedFrom.UTC().Format("2006-01-02T15:04:05")
	}
	if !f.CreatedTo.IsZero() {
		ff.To = f.CreatedTo.UTC().Format("2006-01-02T15:04:05")
	}
	return ff
}
