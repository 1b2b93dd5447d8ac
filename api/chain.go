package api

import (
	"strconv"

	"github.com/redrive/redrive"

	"github.com/google/uuid"
)

// parkedLinkJSON is one member of an ordering guard's chain.
type parkedLinkJSON struct {
	ID             uuid.UUID     `json:"id"`
	CausingMessage string        `json:"causing_message"`
	State          redrive.State `json:"state"`
	ErrorCode      string        `json:"error_code"`
	// Offset is the record's original offset, a decimal string.
	Offset string `json:"offset"`
	// Href is the member's failure in this API.
	Href string `json:"href"`
}

// parkedChainJSON is the ordering-guard chain of a failure: its head and the failures parked
// behind the head, in offset order.
type parkedChainJSON struct {
	Head      *parkedLinkJSON  `json:"head"`
	Parked    []parkedLinkJSON `json:"parked"`
	Truncated bool             `json:"truncated"`
}

func parkedLink(l redrive.ParkedLink) parkedLinkJSON {
	return parkedLinkJSON{ID: l.ID, CausingMessage: l.CausingMessage, State: l.State, ErrorCode: l.ErrorCode,
		Offset: strconv.FormatInt(l.Offset, 10), Href: Prefix + "/failures/" + l.ID.String()}
}

// newParkedChainJSON returns c for the API; nil when the failure is in no chain.
func newParkedChainJSON(c redrive.ParkedChain) *parkedChainJSON {
	if c.IsZero() {
		return nil
	}
	out := &parkedChainJSON{Parked: listOf(c.Parked, func(l *redrive.ParkedLink) parkedLinkJSON { return parkedLink(*l) }),
		Truncated: c.Truncated}
	if c.Head != nil {
		h := parkedLink(*c.Head)
		out.Head = &h
	}
	return out
}
