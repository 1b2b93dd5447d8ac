package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/redrive/redrive/operator"
)

// deadlineStep is how far a streaming export or import moves its connection's deadline at a
// time: it streams for as long as it makes progress, whatever the server's timeouts.
const deadlineStep = time.Minute

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
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 256<<10)
	started := false
	var lastMove time.Time
	_, err = a.core.Export(r.Context(), f, reader(r), func(line []byte) error {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Content-Disposition", `attachment; filename="redrive-failures.ndjson"`)
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
		}
		if now := time.Now(); now.Sub(lastMove) > deadlineStep/4 {
			lastMove = now
			_ = rc.SetWriteDeadline(now.Add(deadlineStep)) // not every writer has deadlines
		}
		_, err := bw.Write(line)
		return err
	})
	if err == nil && !started {
		// Nothing selected: an empty file.
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Content-Disposition", `attachment; filename="redrive-failures.ndjson"`)
		w.WriteHeader(http.StatusOK)
	}
	if err != nil {
		if !started {
			a.fail(w, r, err)
			return
		}
		// The status is sent: cut the stream so that the client sees it incomplete.
		a.log.Error("api: export stopped", "error", err)
		_ = bw.Flush()
		panic(http.ErrAbortHandler)
	}
	_ = bw.Flush()
}

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
