// Package intake is the service's consumer of the error topic and of the dead-letter topics that
// fleets already have: it reads MessageProcessingFailedEvents (MPFEs) and foreign dead-letter
// records in batches, stores them in Postgres idempotently, and commits the batch's offsets only
// after the database commit.
//
// An [Intake] is a confluent-kafka-go consumer in a group, with manual commits. It polls a
// batch (at most Config.BatchSize records, waiting at most Config.BatchWait after the first),
// decodes every record with package avro, and hands the batch to store.Store.Ingest, which
// writes it in one transaction (duplicates skipped by identity.idempotenceId, each failure
// assigned to its group, its state and attempt number set). Polling and decoding the next batch
// overlap with the writing of the current ones: Config.Writers writers, each owning a share of
// the causing messages, write their parts in order, and a committer commits every batch once all
// its parts are written, in poll order.
//
// A record that is not a valid MPFE (not Avro, wrong schema, bad temporality, non-numeric
// offset, over the size limit, text that Postgres cannot store) is wrapped into a new MPFE with
// code DESERIALIZATION_FAILED that carries the raw record, and published to the service's own
// dead-letter topic; the batch's offsets are committed only after the broker acknowledged it.
//
// When Postgres is down, the batch is kept and retried with capped backoff; nothing is
// committed and [Intake.Ready] reports the error until a write succeeds. On shutdown the batch
// in flight is finished and committed within Config.ShutdownTimeout.
//
// Besides the error topic (Config.Topic), Config.Sources names further topics, each in its
// format ([Source], [ParseSource]): Spring Kafka's DeadLetterPublishingRecoverer, a Kafka
// Connect sink's dead-letter queue, a Kafka Streams dead-letter queue (KIP-1034), or a raw copy
// whose original topic is configured. Each foreign record is mapped to a failure like an MPFE
// one (original position, error code from the exception's class, message, stack trace and a
// normalised stack-trace hash, publisher), with an identity derived from its position on the
// dead-letter topic, so that reading it twice stores one row. A record whose headers its format
// cannot make sense of goes to the dead-letter topic with a [HeaderError] that names the header.
//
// A [Reactivator] feeds the records of the service's own dead-letter topic back through the
// sources after a fix, from where its previous run stopped, audited, with its progress in the
// store.
//
// [StateMetrics] refreshes the gauges of failures by state and the age of the oldest open
// failure.
package intake
