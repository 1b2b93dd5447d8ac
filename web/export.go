package web

import (
	"net/http"

	"github.com/redrive/redrive/internal/ndjsonstream"
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
	started, err := ndjsonstream.Serve(w, "redrive-failures.ndjson", func(emit func([]byte) error) error {
		_, err := h.core.Export(r.Context(), f, reader(r), emit)
		return err
	})
	switch {
	case err != nil && !started:
		h.inputError(w, r, err, func(msg string) { h.renderError(w, r, inputStatus(err), "The export could not run: "+msg) })
	case err != nil:
		h.cfg.Logger.Error("web: export stopped", "error", err)
		panic(http.ErrAbortHandler) // cut the stream: the download is seen incomplete
	}
}
