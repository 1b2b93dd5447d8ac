package ndjsonstream_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/redrive/redrive/internal/ndjsonstream"
)

func TestServe(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name    string
		lines   []string
		err     error
		started bool
		body    string
	}{
		{"lines", []string{"{\"a\":1}\n", "{\"b\":2}\n"}, nil, true, "{\"a\":1}\n{\"b\":2}\n"},
		{"empty", nil, nil, true, ""},
		{"error before a line", nil, boom, false, ""},
		{"error after a line", []string{"{}\n"}, boom, true, "{}\n"},
	} {
		w := httptest.NewRecorder()
		started, err := ndjsonstream.Serve(w, "x.ndjson", func(emit func([]byte) error) error {
			for _, l := range c.lines {
				if err := emit([]byte(l)); err != nil {
					return err
				}
			}
			return c.err
		})
		if started != c.started || !errors.Is(err, c.err) || (c.err == nil && err != nil) || w.Body.String() != c.body {
			t.Errorf("%s: started %v, err %v, body %q", c.name, started, err, w.Body.String())
		}
		if started && (w.Header().Get("Content-Type") != "application/x-ndjson" ||
			w.Header().Get("Content-Disposition") != `attachment; filename="x.ndjson"`) {
			t.Errorf("%s: headers %v", c.name, w.Header())
		}
		if !started && w.Header().Get("Content-Type") != "" {
			t.Errorf("%s: headers sent before any line: %v", c.name, w.Header())
		}
	}
}
