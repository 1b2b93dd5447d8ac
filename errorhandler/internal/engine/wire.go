package engine

import (
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/errorhandler"
)

// headerList lists a record's headers for avro.AppendEventHeaders, which writes the MPFE's
// metadata header map straight from them: no map is built per dead-lettered record.
type headerList []errorhandler.Header

// Len returns the number of headers.
func (hs *headerList) Len() int { return len(*hs) }

// Header returns the name and value of header i.
func (hs *headerList) Header(i int) (string, []byte) {
	h := &(*hs)[i]
	return h.Key, h.Value
}

// appendEvent appends the Avro binary datum of e; when e's metadata has no header map, the map
// is written from hs as avro.Metadata.SetHeaders builds it.
// hs is a pointer so that the headers are not copied to the heap on the way.
func appendEvent(b []byte, e *avro.Event, hs *[]errorhandler.Header) ([]byte, error) {
	return avro.AppendEventHeaders(b, e, (*headerList)(hs))
}
