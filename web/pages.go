package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/operator"
)

// paramCursor is the query parameter of a list page's position.
const paramCursor = "cursor"

// overviewPage is the data of the overview.
type overviewPage struct {
	States      []stateCount
	Temporal    []temporalityCount
	TopTopics   []nameLink
	TopServices []nameLink
	Open        int64
	OpenLink    string
	Total       int64
	OldestOpen  *time.Time
	Chart       chart
	Window      string
}

type stateCount struct {
	State redrive.State
	Count int64
	Link  string
}

type temporalityCount struct {
	Temporality avro.Temporality
	Count       int64
	Link        string
}

// nameLink is a topic or service with its open failures and the list of them.
type nameLink struct {
	Name  string
	Count int64
	Link  string
}

// openStates are the states of failures that still wait: the ones an operator can act on.
var openStates = []redrive.State{redrive.StateRetryPending, redrive.StatePermanent}

// temporalities lists the temporalities, for the filter form and the overview.
var temporalities = []avro.Temporality{avro.Temporary, avro.Permanent, avro.Unknown}

func (h *handler) getOverview(w http.ResponseWriter, r *http.Request) {
	now := h.cfg.Now()
	width := h.cfg.ChartWindow / time.Duration(h.cfg.ChartBuckets)
	since := now.Truncate(width).Add(width).Add(-time.Duration(h.cfg.ChartBuckets) * width)
	o, err := h.core.Overview(r.Context(), operator.OverviewRequest{Since: since, Width: width, Buckets: h.cfg.ChartBuckets})
	if err != nil {
		h.serverError(w, r, "overview", err)
		return
	}
	p := overviewPage{Open: o.Open.Total, OpenLink: filterLink(redrive.Filter{States: openStates}), Total: o.Total,
		OldestOpen: o.OldestOpen, Window: windowLabel(h.cfg.ChartWindow)}
	for _, s := range redrive.States {
		p.States = append(p.States, stateCount{State: s, Count: o.ByState[s], Link: filterLink(redrive.Filter{States: []redrive.State{s}})})
	}
	for _, t := range temporalities {
		p.Temporal = append(p.Temporal, temporalityCount{Temporality: t, Count: o.Open.ByTemporality[t],
			Link: filterLink(redrive.Filter{States: openStates, Temporalities: []avro.Temporality{t}})})
	}
	for _, n := range o.TopTopics {
		p.TopTopics = append(p.TopTopics, nameLink{Name: n.Name, Count: n.Count, Link: filterLink(redrive.Filter{States: openStates, Topic: n.Name})})
	}
	for _, n := range o.TopServices {
		p.TopServices = append(p.TopServices, nameLink{Name: n.Name, Count: n.Count,
			Link: filterLink(redrive.Filter{States: openStates, PublisherService: n.Name})})
	}
	p.Chart = newChart(o.Buckets, width)
	h.render(w, r, http.StatusOK, "overview", "Overview", p)
}

// windowLabel names the chart's time span: "24 hours", "7d".
func windowLabel(d time.Duration) string {
	if d <= 72*time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return humanDuration(d)
}

// filterLink returns the address of the failure list filtered by f.
func filterLink(f redrive.Filter) string {
	if q := operator.FilterValues(f).Encode(); q != "" {
		return "/failures?" + q
	}
	return "/failures"
}

// failuresPage is the data of the failure list.
type failuresPage struct {
	Form   filterForm
	States []redrive.State
	Temps  []avro.Temporality
	Error  string
	Rows   []redrive.FailureSummary
	// Filtered is true when a filter applies; Hidden carries it into the action form.
	Filtered bool
	Hidden   []hiddenField
	// MaxBulk is the most failures one action by filter may act on.
	MaxBulk int
	// Here is this page's address; Pager links the first, previous and next page.
	Here  string
	Pager pager
	// Total says how many failures the filter selects ("1,234 failures", "more than 10,000
	// failures"); "" when the list could not be read.
	Total string
	// SourceFormats lists the source formats for the advanced search.
	SourceFormats []redrive.SourceFormat
	// Clusters lists the configured Kafka clusters, for the cluster filter; MultiCluster is
	// true with more than one (or one not named default): the rows show their cluster.
	Clusters     []string
	MultiCluster bool
	// ExportLink downloads the failures the filter selects as NDJSON.
	ExportLink string
	// PayloadSearch says the principal may search by key, key prefix, header value and
	// payload; without it those fields are disabled (the core refuses them).
	PayloadSearch bool
}

// hiddenField is a name and value carried through a form.
type hiddenField struct{ Name, Value string }

// hiddenFields returns the filter f as hidden form fields.
func hiddenFields(f redrive.Filter) []hiddenField {
	v := operator.FilterValues(f)
	var out []hiddenField
	for _, name := range operator.FilterParams {
		for _, value := range v[name] {
			out = append(out, hiddenField{Name: name, Value: value})
		}
	}
	return out
}

func (h *handler) getFailures(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := failuresPage{States: redrive.States, Temps: temporalities, SourceFormats: sourceFormats, Here: r.URL.RequestURI(), MaxBulk: h.core.MaxBulk(),
		PayloadSearch: reader(r).Payload, Clusters: h.core.Clusters()}
	p.MultiCluster = len(p.Clusters) > 1 || p.Clusters[0] != redrive.DefaultCluster
	f, err := operator.ParseFilter(q)
	if err != nil {
		// The refused filter is shown back as it was given, with the core's reason.
		h.inputError(w, r, err, func(msg string) {
			p.Form, p.Error = formFromValues(q), msg
			h.render(w, r, http.StatusBadRequest, "failures", "Failures", p)
		})
		return
	}
	p.Form = newFilterForm(f)
	p.Filtered = !f.IsZero()
	p.Hidden = hiddenFields(f)
	cursor := q.Get(paramCursor)
	page, err := h.core.ListFailures(r.Context(), operator.ListRequest{Filter: f, Order: redrive.NewestFirst, Limit: h.cfg.PageSize,
		Cursor: cursor, Total: f.PayloadField == "", Reader: reader(r)})
	if err != nil {
		h.inputError(w, r, err, func(msg string) {
			p.Error = msg
			h.render(w, r, inputStatus(err), "failures", "Failures", p)
		})
		return
	}
	p.Rows = page.Items
	p.Total = totalLabel(page.Total, page.TotalMore, "failure")
	if sc := page.FieldScan; sc != nil {
		p.Total = scanLabel(len(page.Items), sc)
	}
	p.ExportLink = "/failures/export"
	if v := operator.FilterValues(f).Encode(); v != "" {
		p.ExportLink += "?" + v
	}
	p.Pager = newPager("/failures", operator.FilterValues(f), cursor, parseHistory(q.Get(paramPrev)), page.Next)
	h.render(w, r, http.StatusOK, "failures", "Failures", p)
}

// scanLabel says what a page of a decoded field search shows: its matches among the
// candidates decoded, and whether the scan stopped at its bound (Next continues it).
func scanLabel(matches int, sc *operator.FieldScan) string {
	s := thousands(int64(matches)) + " matching on this page, " + thousands(int64(sc.Scanned)) + " candidate"
	if sc.Scanned != 1 {
		s += "s"
	}
	s += " decoded"
	if sc.Undecoded > 0 {
		s += " (" + thousands(int64(sc.Undecoded)) + " of them could not be decoded)"
	}
	if sc.Limited {
		s += "; the scan stopped at its bound: Next continues it"
	}
	return s
}

// inputError answers a request that the core refused: a client's mistake (*operator.InputError)
// goes to show, with its text; anything else is a server error.
func (h *handler) inputError(w http.ResponseWriter, r *http.Request, err error, show func(msg string)) {
	var ie *operator.InputError
	if errors.As(err, &ie) {
		show(ie.Error())
		return
	}
	h.serverError(w, r, "request", err)
}

// inputStatus is the status of a page that shows a refused input: the core's (403 for a
// criterion the principal may not search by), else 400.
func inputStatus(err error) int {
	var ie *operator.InputError
	if errors.As(err, &ie) {
		return ie.Status()
	}
	return http.StatusBadRequest
}

// failurePage is the data of a failure's detail page.
type failurePage struct {
	F          *operator.FailureView
	Value      bytesView
	Key        bytesView
	Headers    []headerView
	Actionable bool
	GroupLink  string
	// DefaultTab is the value view shown first: json, decoded, text or hex.
	DefaultTab string
	// Hidden, when not empty, says why the payload is not shown (metadata only).
	Hidden string
	// Masked says that masking rules hide parts of the payload shown.
	Masked bool
}

// reader is the request's principal as a reader of payloads.
func reader(r *http.Request) operator.Reader {
	p := sessionFrom(r.Context()).principal
	return operator.Reader{Principal: p.Name, Payload: p.CanReadPayload()}
}

func (h *handler) getFailure(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		h.renderError(w, r, http.StatusNotFound, "There is no failure with this id.")
		return
	}
	f, err := h.core.Failure(r.Context(), id, reader(r))
	switch {
	case errors.Is(err, redrive.ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no failure with this id.")
		return
	case err != nil:
		h.serverError(w, r, "get failure", err)
		return
	}
	limit := h.cfg.MaxPayloadView
	p := failurePage{
		F:          f,
		Value:      newBytesView(f.Value, false, limit),
		Key:        newBytesView(f.Key, f.Key == nil, limit),
		Actionable: f.State.Resendable(),
		GroupLink:  filterLink(redrive.Filter{GroupID: f.GroupID}),
	}
	p.Hidden, p.Masked = f.PayloadHidden, f.Masked
	if p.Hidden == "" {
		p.Value.addJSON(f.Value)
		p.Value.addDecoded(h.core.DecodeFailure(f))
		p.DefaultTab = defaultTab(&p.Value)
	}
	for i, hd := range f.Headers {
		hv := headerView{Index: i, Name: textView([]byte(hd.Name)), Value: newBytesView(hd.Value, hd.Value == nil, limit)}
		if p.Hidden != "" {
			hv.Value = bytesView{Null: f.HeaderSizes[i] < 0, Size: max(0, f.HeaderSizes[i])}
		}
		p.Headers = append(p.Headers, hv)
	}
	h.render(w, r, http.StatusOK, "failure", "Failure "+f.ID.String(), p)
}

// getPayload sends a failure's key or value, whole, as a download.
func (h *handler) getPayload(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		h.renderError(w, r, http.StatusNotFound, "There is no page here.")
		return
	}
	part, err := operator.ParsePart("part", r.PathValue("part"))
	if err != nil || r.PathValue("part") == "" {
		h.renderError(w, r, http.StatusNotFound, "There is no page here.")
		return
	}
	p, err := h.core.Payload(r.Context(), id, part, reader(r), "download")
	switch {
	case errors.Is(err, redrive.ErrPayloadForbidden):
		h.renderError(w, r, http.StatusForbidden, "Your role does not include reading payloads: "+operator.HiddenReason+".")
		return
	case errors.Is(err, redrive.ErrNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no failure with this id.")
		return
	case errors.Is(err, redrive.ErrNullPart):
		h.renderError(w, r, http.StatusNotFound, "The key of this failure is null.")
		return
	case err != nil:
		h.serverError(w, r, "get payload", err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", `attachment; filename="`+id.String()+"-"+string(part)+`.bin"`)
	hd.Set("Content-Length", strconv.Itoa(len(p.Bytes)))
	hd.Set("Cache-Control", "no-store")
	_, _ = w.Write(p.Bytes)
}

// defaultTab picks the view that reads best: JSON, then decoded, then text when the value is
// mostly printable, else hex.
func defaultTab(v *bytesView) string {
	switch {
	case v.JSON != nil:
		return "json"
	case v.Decoded != nil:
		return "decoded"
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
