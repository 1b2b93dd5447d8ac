package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/redrive/redrive/internal/ndjsonstream"
	"github.com/redrive/redrive/operator"
)

// exportFailures serves GET /failures/export: the failures the filter selects as NDJSON,
// streamed.
func (a *api) exportFailures(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, operator.FilterParams)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f, err := operator.ParseFilter(q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	started, err := ndjsonstream.Serve(w, "redrive-failures.ndjson", func(emit func([]byte) error) error {
		_, err := a.core.Export(r.Context(), f, reader(r), emit)
		return err
	})
	switch {
	case err != nil && !started:
		a.fail(w, r, err)
	case err != nil:
		// The status is sent: cut the stream so that the client sees it incomplete.
		a.log.Error("api: export stopped", "error", err)
		panic(http.ErrAbortHandler)
	}
}

// deadlineStep is how far a streaming import moves its connection's read deadline at a time:
// it reads for as long as it makes progress, whatever the server's timeouts.
const deadlineStep = time.Minute

// maxImportBytes bounds an import's body.
const maxImportBytes = 8 << 30

// importResponse counts an import.
type importResponse struct {
	DryRun   bool  `json:"dry_run"`
	Read     int64 `json:"read"`
	Inserted int64 `json:"inserted"`
	Skipped  int64 `json:"skipped"`
}

// importFailures serves POST /failures/import: NDJSON as export writes it (admin).
func (a *api) importFailures(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, []string{"dry_run"})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	dryRun := false
	if s := q.Get("dry_run"); s != "" {
		if dryRun, err = strconv.ParseBool(s); err != nil {
			a.fail(w, r, badRequest("dry_run", "%q is not true or false", s))
			return
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/x-ndjson" && ct != "application/json" {
		a.fail(w, r, &requestError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
			detail: fmt.Sprintf("%q is not application/x-ndjson", ct)})
		return
	}
	rc := http.NewResponseController(w)
	body := &deadlineReader{r: http.MaxBytesReader(w, r.Body, maxImportBytes), move: func() {
		_ = rc.SetReadDeadline(time.Now().Add(deadlineStep))
	}}
	res, err := a.core.Import(r.Context(), body, dryRun, principal(r).Name)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		a.fail(w, r, &requestError{status: http.StatusRequestEntityTooLarge, field: "body", detail: fmt.Sprintf("larger than %d bytes", int64(maxImportBytes))})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, importResponse{DryRun: dryRun, Read: res.Read, Inserted: res.Inserted, Skipped: res.Skipped})
}

// deadlineReader moves the connection's read deadline ahead while a large body arrives.
type deadlineReader struct {
	r     io.Reader
	move  func()
	moved time.Time
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.moved) > deadlineStep/4 {
		d.moved = now
		d.move()
	}
	return d.r.Read(p)
}
