package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/clip"
	"github.com/redrive/redrive/operator"
)

// An action's result travels from the POST that ran it to the result page in the address of
// a redirect (post/redirect/get): reloading the result page shows the result again and acts
// on nothing. The address holds the counts and the first maxResultItems failures that were not
// changed, as JSON in base64url, and an HMAC-SHA256 of it under the session key, so that a
// result page shows only what this server did.
const (
	// paramResult is the result page's parameter: payload "." MAC.
	paramResult = "r"
	// maxResultItems bounds the failures not changed that the result page lists.
	maxResultItems = 10
	// maxResultDetail bounds the bytes of each of their details.
	maxResultDetail = 160
	// resultMACLabel separates the MAC of a result from the CSRF tokens under the same key.
	resultMACLabel = "redrive action result v1\x00"
)

// errBadResult says that a result address is not one this server wrote.
var errBadResult = errors.New("not a result address of this server")

// actionRecord is the result of an action as the result page's address carries it.
type actionRecord struct {
	Action    operator.Action         `json:"a"`
	Principal string                  `json:"p"`
	At        int64                   `json:"t"` // Unix seconds
	All       bool                    `json:"all,omitempty"`
	Matched   int                     `json:"m"`
	Counts    map[redrive.Outcome]int `json:"c"`
	Others    []recordItem            `json:"o,omitempty"`
	// MoreOthers counts the failures not changed beyond Others.
	MoreOthers int    `json:"mo,omitempty"`
	Back       string `json:"b,omitempty"`
	Single     string `json:"s,omitempty"`
	// Parked counts the failures parked behind the head resent after it; the ones not
	// resent are in Others.
	Parked int `json:"pk,omitempty"`
}

// recordItem is a failure that the action did not change.
type recordItem struct {
	ID      uuid.UUID       `json:"i"`
	Outcome redrive.Outcome `json:"o"`
	Before  redrive.State   `json:"b,omitempty"`
	After   redrive.State   `json:"f,omitempty"`
	Detail  string          `json:"d,omitempty"`
}

// newActionRecord keeps what the result page of res shows.
func newActionRecord(a actionForm, res *operator.ActionResult, principal string, at time.Time) actionRecord {
	rec := actionRecord{Action: a.Action, Principal: principal, At: at.Unix(), All: a.All, Matched: res.Matched,
		Counts: res.Counts, Back: a.Back}
	for _, it := range res.Items {
		if it.Outcome == a.Action.Success() {
			continue
		}
		if len(rec.Others) == maxResultItems {
			rec.MoreOthers++
			continue
		}
		rec.Others = append(rec.Others, recordItem{ID: it.ID, Outcome: it.Outcome, Before: it.Before, After: it.After,
			Detail: clip.Text(it.Detail, maxResultDetail)})
	}
	for _, it := range res.Parked {
		if it.Outcome == redrive.OutcomeResent {
			rec.Parked++
		} else if len(rec.Others) < maxResultItems {
			rec.Others = append(rec.Others, recordItem{ID: it.ID, Outcome: it.Outcome, Before: it.Before, After: it.After,
				Detail: clip.Text(it.Detail, maxResultDetail)})
		}
	}
	if len(a.IDs) == 1 {
		rec.Single = "/failures/" + a.IDs[0].String()
	}
	return rec
}

// resultMAC returns the MAC of a result payload.
func (h *handler) resultMAC(payload string) []byte {
	m := hmac.New(sha256.New, h.cfg.SessionKey)
	m.Write([]byte(resultMACLabel))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// resultLink returns the address of the result page of rec.
func (h *handler) resultLink(rec actionRecord) (string, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("encode result: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(b)
	v := payload + "." + base64.RawURLEncoding.EncodeToString(h.resultMAC(payload))
	return "/failures/result?" + url.Values{paramResult: {v}}.Encode(), nil
}

// readResult verifies and decodes a result page's parameter.
func (h *handler) readResult(s string) (actionRecord, error) {
	payload, mac, ok := strings.Cut(s, ".")
	if !ok {
		return actionRecord{}, errBadResult
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, h.resultMAC(payload)) {
		return actionRecord{}, errBadResult
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return actionRecord{}, errBadResult
	}
	var rec actionRecord
	if err := json.Unmarshal(b, &rec); err != nil || (rec.Action != operator.Retry && rec.Action != operator.Close) {
		return actionRecord{}, errBadResult
	}
	return rec, nil
}

// getResult shows the result of an action that a POST ran and redirected here: it reads the
// result from the address and acts on nothing.
func (h *handler) getResult(w http.ResponseWriter, r *http.Request) {
	rec, err := h.readResult(r.URL.Query().Get(paramResult))
	if err != nil {
		h.renderError(w, r, http.StatusBadRequest, "This result address is not valid: it was not written by this server, or it was changed.")
		return
	}
	p := resultPage{A: actionForm{Action: rec.Action, All: rec.All}, Matched: rec.Matched, By: rec.Principal,
		At: time.Unix(rec.At, 0).UTC(), MoreOthers: rec.MoreOthers, Parked: rec.Parked}
	if rec.Single != "" {
		p.Single = localPath(rec.Single)
	}
	for _, o := range rec.Action.Outcomes() {
		p.Counts = append(p.Counts, outcomeCount{Outcome: o, Count: rec.Counts[o], Success: o == rec.Action.Success()})
	}
	for _, it := range rec.Others {
		p.Others = append(p.Others, operator.ItemOutcome{ID: it.ID, Outcome: it.Outcome, Before: it.Before, After: it.After, Detail: it.Detail})
	}
	// Each link once: the failure acted on, where the action started (when that is another
	// page), and the list.
	back := localPath(rec.Back)
	if back != p.Single && back != "/failures" && back != "/" {
		p.Back = back
	}
	title := "Retried"
	if rec.Action == operator.Close {
		title = "Closed"
	}
	h.render(w, r, http.StatusOK, "result", title, p)
}
