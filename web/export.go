package web

import (
	"bufio"
	"net/http"
	"time"

	"github.com/redrive/redrive/operator"
)

// getExport sends the failures a filter selects as NDJSON (operator.Core.Export), streamed:
// without the payload permission the lines carry no payload bytes; masking applies.
func (h *handler) getExport(w http.ResponseWriter, r *http.Request) {
	f, err := operator.ParseFilter(r.URL.Query())
	if err != nil {
		h.inputError(w, r, err, func(msg string) { h.renderError(w, r, http.StatusBadRequest, "The filter is not valid: "+msg) })
		return
	}
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 256<<10)
	started := false
	var moved time.Time
	_, err = h.core.Export(r.Context(), f, reader(r), func(line []byte) error {
		if !started {
			started = true
			hd := w.Header()
			hd.Set("Content-Type", "application/x-ndjson")
			hd.Set("Content-Disposition", `attachment; filename="redrive-failures.ndjson"`)
			hd.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}
		if now := time.Now(); now.Sub(moved) > 15*time.Second {
			moved = now
			_ = rc.SetWriteDeadline(now.Add(time.Minute)) // stream as long as it makes progress
		}
		_, err := bw.Write(line)
		return err
	})
	switch {
	case err != nil && !started:
		h.inputError(w, r, err, func(msg string) { h.renderError(w, r, http.StatusBadRequest, "The export could not run: "+msg) })
		return
	case err != nil:
		h.cfg.Logger.Error("web: export stopped", "error", err)
		_ = bw.Flush()
		panic(http.ErrAbortHandler) // cut the stream: the download is seen incomplete
	case !started:
		hd := w.Header()
		hd.Set("Content-Type", "application/x-ndjson")
		hd.Set("Content-Disposition", `attachment; filename="redrive-failures.ndjson"`)
		w.WriteHeader(http.StatusOK)
	}
	_ = bw.Flush()
}
