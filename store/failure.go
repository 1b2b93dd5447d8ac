package store

// causingMessage is CausingMessage for an incoming failure; when it would fall back to a
// position the source does not know (UnknownPosition), it is the record's position on the source
// topic instead, so that unrelated failures of a raw source do not share one identity.
func (in Incoming) causingMessage() string {
	cm := CausingMessage(in.Event, in.Headers)
	m := in.Event.References.Message
	if in.Source.Topic != "" && (m.Partition == UnknownPosition || m.Offset == UnknownPosition) &&
		cm == TopicPartitionOffset(m.TopicName, m.Partition, m.Offset) {
		return TopicPartitionOffset(in.Source.Topic, in.Source.Partition, in.Source.Offset)
	}
	return cm
}
