package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/operator"
)

// repairBody is the body of POST /failures/{id}/repair.
type repairBody struct {
	Reason *string `json:"reason"`
	// Value is the edited value as text in ValueFormat (text, json, avro, protobuf or
	// jsonschema); ValueBase64 the
	// edited bytes. At most one; neither keeps the original value.
	Value       *string        `json:"value"`
	ValueFormat string         `json:"value_format"`
	ValueBase64 *[]byte        `json:"value_base64"`
	Headers     *[]headerInput `json:"headers"`
	TargetTopic string         `json:"target_topic"`
}

// headerInput is an edited header: its value as text, or in base64, or null.
type headerInput struct {
	Name        string  `json:"name"`
	Value       *string `json:"value"`
	ValueBase64 *[]byte `json:"value_base64"`
}

// revisionJSON is a stored repair.
type revisionJSON struct {
	ID          int64        `json:"id"`
	FailureID   string       `json:"failure_id"`
	Principal   string       `json:"principal"`
	Reason      string       `json:"reason"`
	TargetTopic string       `json:"target_topic"`
	Key         *bytesJSON   `json:"key"`
	Value       *bytesJSON   `json:"value"`
	Headers     []headerJSON `json:"headers"`
	CreatedAt   time.Time    `json:"created_at"`
	Outcome     *string      `json:"outcome"`
	Error       *string      `json:"error"`
	ResentAt    *time.Time   `json:"resent_at"`
}

// repairFailure serves POST /failures/{id}/repair.
func (a *api) repairFailure(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		_, err = parseQuery(r)
	}
	var body repairBody
	if err == nil {
		err = a.decodeBody(w, r, &body, false)
	}
	req := operator.RepairRequest{ID: id, Principal: principal(r).Name, Reason: deref(body.Reason), TargetTopic: body.TargetTopic,
		Payload: reader(r).Payload}
	switch {
	case err != nil:
	case body.Value != nil && body.ValueBase64 != nil:
		err = badRequest("value_base64", "give value or value_base64, not both")
	case body.ValueBase64 != nil:
		req.Value, req.ValueFormat = *body.ValueBase64, operator.EditBytes
	case body.Value != nil:
		req.Value, req.ValueFormat = []byte(*body.Value), body.ValueFormat
		if req.ValueFormat == "" {
			req.ValueFormat = operator.EditText
		}
	}
	if err == nil && body.Headers != nil {
		req.Headers = []avro.Header{}
		for i, h := range *body.Headers {
			if h.Value != nil && h.ValueBase64 != nil {
				err = badRequest("headers["+strconv.Itoa(i)+"].value_base64", "give value or value_base64, not both")
				break
			}
			hd := avro.Header{Name: h.Name}
			switch {
			case h.Value != nil:
				hd.Value = []byte(*h.Value)
			case h.ValueBase64 != nil:
				hd.Value = *h.ValueBase64
			}
			req.Headers = append(req.Headers, hd)
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.core.Repair(r.Context(), req)
	if err != nil && res == nil {
		a.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if res.Outcome.Outcome != redrive.OutcomeResent {
		status = http.StatusBadGateway
	}
	writeJSON(w, status, map[string]any{"revision": a.newRevisionJSON(res.Revision), "result": newItemJSON(res.Outcome)})
}

// listRevisions serves GET /failures/{id}/revisions.
func (a *api) listRevisions(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idOnly(w, r)
	if !ok {
		return
	}
	revs, err := a.core.Revisions(r.Context(), id, reader(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	resp := page[revisionJSON]{Data: make([]revisionJSON, len(revs))}
	for i := range revs {
		resp.Data[i] = a.newRevisionJSON(&revs[i])
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *api) newRevisionJSON(rev *redrive.Revision) revisionJSON {
	out := revisionJSON{ID: rev.ID, FailureID: rev.FailureID.String(), Principal: rev.Principal, Reason: rev.Reason,
		TargetTopic: rev.TargetTopic, Key: newBytesJSON(rev.Key, a.cfg.InlinePayloadBytes), Value: newBytesJSON(rev.Value, a.cfg.InlinePayloadBytes),
		Headers: make([]headerJSON, len(rev.Headers)), CreatedAt: rev.CreatedAt, Error: rev.OutcomeError, ResentAt: rev.ResentAt}
	for i, h := range rev.Headers {
		out.Headers[i] = headerJSON{Name: h.Name, Value: newBytesJSON(h.Value, a.cfg.InlinePayloadBytes)}
	}
	if rev.Outcome != "" {
		o := rev.Outcome
		out.Outcome = &o
	}
	return out
}
