package avro

// Entries and headers of the per-key ordering guard (errorhandler.Ordering).
const (
	// CodeParkedBehind is the error code of a record the ordering guard parked: it was not
	// handed to the handler because an earlier record of its key on its partition was
	// dead-lettered and is not resolved yet.
	CodeParkedBehind = "PARKED_BEHIND"
	// ParkedBehindEntry is the metadata map entry of a parked record's MPFE holding the event id
	// of the head failure's MPFE (the first dead-lettered record of the key).
	ParkedBehindEntry = "redrive-parked-behind"
	// ParkedHeadEntry is the metadata map entry of a parked record's MPFE holding the head
	// failure's causing-message identity, or "overflow:topic/partition@offset" when the
	// partition's guard overflowed (errorhandler.OrderingParkAll).
	ParkedHeadEntry = "redrive-parked-head"
	// HeaderRelease on a resent record names a head failure (its causing-message identity)
	// that an operator closed with release: the ordering guard treats the head as resolved.
	HeaderRelease = "redrive-release"
)
