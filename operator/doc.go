// Package operator holds every use case of redrive's operators, once, for the REST API and the
// web UI alike: list, count and read failures with one filter type ([ParseFilter] reads it
// from URL values, [FilterInput] from JSON, [FilterValues] writes it back) and keyset cursors;
// retry and close by ids or by filter, with a dry run, chunking and the bulk cap, reporting one
// [ItemOutcome] per failure; read and edit failure groups; audit reads; overview counts; and
// the Avro view of payloads. The translators (api/ for JSON, web/ for HTML) parse their input,
// call one method of [Core] and render the result.
//
// Errors: a client's mistake is an *[InputError] naming the field at fault (its text is safe
// to show); an unknown id wraps [redrive.ErrNotFound]; an action that cannot run on this instance wraps
// [redrive.ErrUnavailable]; a read that took longer than Config.QueryTimeout wraps
// context.DeadlineExceeded. Anything else is an internal error whose text must not reach a
// client.
//
// Payload confidentiality is one policy, applied here for every client (confidentiality.go,
// docs/confidentiality.md): what a [Reader] sees of a record (nothing without the payload
// permission; masked by the rules of the failure's own topic with it, revisions and repair
// answers included), which criteria it may search, count, export or act by (key, key prefix,
// payload, decoded field and header values need the permission, and masked bytes are never
// searchable: a decoded field search matches the masked view; a refusal is a forbidden
// *[InputError] that does not depend on the term), and which terms of a described filter it
// sees (job selections, audit details).
//
// A decoded field search (redrive.Filter.PayloadField) runs here, not in the store: the
// candidates of the rest of the filter are decoded with their cluster's decoder, masked and
// matched, at most Config.MaxFieldScan per request (fieldsearch.go).
//
// Rules that hold for every client: a bulk action by filter needs at least one criterion and
// may act on at most Config.MaxBulk failures (a dry run counts them); a close needs a reason;
// only failures that exist and that the action changed, or whose resend was attempted, get an
// audit entry.
package operator
