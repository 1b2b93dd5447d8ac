package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/store"
)

// overviewPage is the data of the overview.
type overviewPage struct {
	Stats      *Stats
	States     []stateCount
	Temporal   []temporalityCount
	Open       int64
	Total      int64
	OldestOpen *time.Time
	Chart      chart
	Window     string
}

type stateCount struct {
	State store.State
	Count int64
	Link  string
}

type temporalityCount struct {
	Temporality avro.Temporality
	Count       int64
	Link        string
}

func (h *handler) getOverview(w http.ResponseWriter, r *http.Request) {
	now := h.cfg.Now()
	width := h.cfg.ChartWindow / time.Duration(h.cfg.ChartBuckets)
	since := now.Truncate(width).Add(width).Add(-time.Duration(h.cfg.ChartBuckets) * width)
	st, err := h.cfg.Backend.Stats(r.Context(), since, width)
	if err != nil {
		h.serverError(w, r, "stats", err)
		return
	}
	p := overviewPage{Stats: st, OldestOpen: st.OldestOpen, Window: windowLabel(h.cfg.ChartWindow)}
	for _, s := range store.States {
		n := st.ByState[s]
		p.Total += n
		if s.Resendable() {
			p.Open += n
		}
		p.States = append(p.States, stateCount{State: s, Count: n, Link: filterLink(Filter{States: []store.State{s}})})
	}
	for _, t := range temporalities {
		p.Temporal = append(p.Temporal, temporalityCount{Temporality: t, Count: st.ByTemporality[t],
			Link: filterLink(Filter{States: openStates, Temporalities: []avro.Temporality{t}})})
	}
	p.Chart = newChart(fillBuckets(st.Buckets, since, width, h.cfg.ChartBuckets), width)
	h.render(w, r, http.StatusOK, "overview", "Overview", p)
}

// windowLabel names the chart's time span: "24 hours", "7d".
func windowLabel(d time.Duration) string {
	if d <= 72*time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return humanDuration(d)
}

// openStates are the states of failures that still wait: the ones an operator can act on.
var openStates = []store.State{store.StateRetryPending, store.StatePermanent}

// fillBuckets returns n buckets from since, taking the counts of got and zero elsewhere.
func fillBuckets(got []Bucket, since time.Time, width time.Duration, n int) []Bucket {
	out := make([]Bucket, n)
	for i := range out {
		out[i].Start = since.Add(time.Duration(i) * width)
	}
	for _, b := range got {
		i := int(b.Start.Sub(since) / width)
		if b.Start.Before(since) || i >= n {
			continue
		}
		out[i].Count += b.Count
	}
	return out
}

// filterLink returns the address of the failure list filtered by f.
func filterLink(f Filter) string {
	if q := f.Values().Encode(); q != "" {
		return "/failures?" + q
	}
	return "/failures"
}

// failuresPage is the data of the failure list.
type failuresPage struct {
	Form   filterForm
	States []store.State
	Temps  []avro.Temporality
	Error  string
	Rows   []FailureRow
	// Filtered is true when a filter applies; Hidden carries it into the action form.
	Filtered bool
	Hidden   []hiddenField
	// Here is this page's address; Next and First those of the next and first page.
	Here, Next, First string
}

// hiddenField is a name and value carried through a form.
type hiddenField struct{ Name, Value string }

func hiddenFields(v url.Values) []hiddenField {
	var out []hiddenField
	for _, name := range filterParams {
		for _, value := range v[name] {
			out = append(out, hiddenField{Name: name, Value: value})
		}
	}
	return out
}

func (h *handler) getFailures(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := failuresPage{States: store.States, Temps: temporalities, Here: r.URL.RequestURI()}
	f, err := ParseFilter(q)
	if err != nil {
		p.Form = newFilterForm(Filter{})
		p.Error = strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
		h.render(w, r, http.StatusBadRequest, "failures", "Failures", p)
		return
	}
	p.Form = newFilterForm(f)
	fv := f.Values()
	p.Filtered = len(fv) > 0
	p.Hidden = hiddenFields(fv)
	cursor := q.Get(paramCursor)
	page, err := h.cfg.Backend.ListFailures(r.Context(), ListQuery{Filter: f, Cursor: cursor, Limit: h.cfg.PageSize})
	switch {
	case errors.Is(err, ErrInvalid):
		p.Error = strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
		h.render(w, r, http.StatusBadRequest, "failures", "Failures", p)
		return
	case err != nil:
		h.serverError(w, r, "list failures", err)
		return
	}
	p.Rows = page.Items
	if cursor != "" {
		p.First = filterLink(f)
	}
	if page.Next != "" {
		nv := f.Values()
		nv.Set(paramCursor, page.Next)
		p.Next = "/failures?" + nv.Encode()
	}
	h.render(w, r, http.StatusOK, "failures", "Failures", p)
}

// failurePage is the data of a failure's detail page.
type failurePage struct {
	F          *FailureDetail
	Value      bytesView
	Key        bytesView
	Headers    []headerView
	Actionable bool
	GroupLink  string
	// DefaultTab is the value view shown first: json, avro, text or hex.
	DefaultTab string
}

func (h *handler) getFailure(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		h.renderError(w, r, http.StatusNotFound, "There is no failure with this id.")
		return
	}
	d, ok := h.loadFailure(w, r, id)
	if !ok {
		return
	}
	max := h.cfg.MaxPayloadView
	p := failurePage{
		F:          d,
		Value:      newBytesView(d.Value, false, max),
		Key:        newBytesView(d.Key, d.Key == nil, max),
		Actionable: d.State.Resendable(),
		GroupLink:  filterLink(Filter{GroupID: d.GroupID}),
	}
	p.Value.addJSON(d.Value)
	h.avro.view(d.Value, &p.Value)
	p.DefaultTab = defaultTab(&p.Value)
	for i, hd := range d.Headers {
		p.Headers = append(p.Headers, headerView{Index: i, Name: textView([]byte(hd.Name)), Value: newBytesView(hd.Value, hd.Value == nil, max)})
	}
	h.render(w, r, http.StatusOK, "failure", "Failure "+d.ID.String(), p)
}

// loadFailure reads the failure with id, or answers the request with 404 or 500 and reports
// false.
func (h *handler) loadFailure(w http.ResponseWriter, r *http.Request, id uuid.UUID) (*FailureDetail, bool) {
	d, err := h.cfg.Backend.Failure(r.Context(), id)
	switch {
	case errors.Is(err, ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no failure with this id.")
		return nil, false
	case err != nil:
		h.serverError(w, r, "get failure", err)
		return nil, false
	}
	return d, true
}

// getPayload sends a failure's key or value, whole, as a download.
func (h *handler) getPayload(w http.ResponseWriter, r *http.Request) {
	part := r.PathValue("part")
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil || (part != "key" && part != "value") {
		h.renderError(w, r, http.StatusNotFound, "There is no page here.")
		return
	}
	d, ok := h.loadFailure(w, r, id)
	if !ok {
		return
	}
	b := d.Value
	if part == "key" {
		if d.Key == nil {
			h.renderError(w, r, http.StatusNotFound, "The key of this failure is null.")
			return
		}
		b = d.Key
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", `attachment; filename="`+id.String()+"-"+part+`.bin"`)
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	hd.Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// groupsPage is the data of the group list.
type groupsPage struct {
	Groups  []groupRow
	Next    string
	First   string
	Updated int64
}

type groupRow struct {
	Group
	Link string
	Here string
}

func (h *handler) getGroups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cursor := q.Get(paramCursor)
	page, err := h.cfg.Backend.ListGroups(r.Context(), GroupQuery{Cursor: cursor, Limit: h.cfg.PageSize})
	switch {
	case errors.Is(err, ErrInvalid):
		h.renderError(w, r, http.StatusBadRequest, "This page address is not valid.")
		return
	case err != nil:
		h.serverError(w, r, "list groups", err)
		return
	}
	p := groupsPage{}
	p.Updated, _ = strconv.ParseInt(q.Get("updated"), 10, 64)
	here := r.URL.RequestURI()
	for _, g := range page.Items {
		p.Groups = append(p.Groups, groupRow{Group: g, Link: filterLink(Filter{GroupID: g.ID}), Here: here})
	}
	if cursor != "" {
		p.First = "/groups"
	}
	if page.Next != "" {
		p.Next = "/groups?" + url.Values{paramCursor: {page.Next}}.Encode()
	}
	h.render(w, r, http.StatusOK, "groups", "Groups", p)
}

// defaultTab picks the view that reads best: JSON, then Avro, then text when the value is
// mostly printable, else hex.
func defaultTab(v *bytesView) string {
	switch {
	case v.JSON != nil:
		return "json"
	case v.Avro != nil:
		return "avro"
	}
	escaped := 0
	for _, s := range v.Text {
		if s.Esc {
			escaped += len(s.S) / 4
		}
	}
	if v.Shown > 0 && escaped*10 <= v.Shown {
		return "text"
	}
	return "hex"
}
