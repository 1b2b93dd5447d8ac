// Package ndjsonstream streams an NDJSON download over HTTP: the API's and the UI's export of
// failures (operator.Core.Export) share it.
package ndjsonstream

import (
	"bufio"
	"net/http"
	"time"
)

// deadlineStep is how far the stream moves its connection's write deadline at a time: it
// streams for as long as it makes progress, whatever the server's timeouts.
const deadlineStep = time.Minute

// Serve answers w with the lines that produce emits, as an NDJSON attachment named filename.
// The status and headers are sent with the first line (or, when produce emits none and
// succeeds, for an empty file), so that an error before any line can still be answered by the
// caller: Serve returns produce's error and whether the status was sent. After that, the
// caller can only cut the stream (panic(http.ErrAbortHandler)) so that the client sees it
// incomplete; Serve has flushed what was written.
func Serve(w http.ResponseWriter, filename string, produce func(emit func(line []byte) error) error) (started bool, err error) {
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 256<<10)
	start := func() {
		started = true
		h := w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Content-Disposition", `attachment; filename="`+filename+`"`)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
	}
	var moved time.Time
	err = produce(func(line []byte) error {
		if !started {
			start()
		}
		if now := time.Now(); now.Sub(moved) > deadlineStep/4 {
			moved = now
			_ = rc.SetWriteDeadline(now.Add(deadlineStep)) // not every writer has deadlines
		}
		_, err := bw.Write(line)
		return err
	})
	if err == nil && !started {
		start() // nothing selected: an empty file
	}
	if started {
		_ = bw.Flush()
	}
	return started, err
}
