// Package api is redrive's REST API for operators and tools (chi/v5, JSON in snake_case, under
// /api/v1): browse and filter failures with keyset pagination, inspect one with its payload,
// headers, attempt chain and audit trail, retry and close one or many (by ids or by filter, with
// a dry run), edit failure groups, and read counts. The OpenAPI 3 document of every route is
// served at /api/v1/openapi.json.
//
// The package only translates HTTP: each handler parses its input, calls one method of the
// operator core ([operator.Core], shared with the web UI) and writes JSON. Who may call what is
// decided by an [auth.Authenticator] (bearer tokens, a trusted proxy, OpenID Connect access
// tokens) and the roles: viewer reads, operator also retries, closes and edits groups; admins
// also list and revoke the UI's sessions (GET and DELETE /sessions).
//
// Request bodies are decoded strictly: member names match exactly, no member twice, no unknown
// member. Kafka offsets are written as decimal strings, since they can pass 2^53.
//
// Every error is an RFC 9457 problem document (application/problem+json) whose detail names the
// field at fault: 400 for malformed input, 401/403 for authentication and roles, 404 for an
// unknown id, 409 for an action the failure's state does not allow, 413 for a body over the
// limit, 422 for a well-formed request that cannot be served as asked, 503 when resending is
// unavailable, a query timed out, or a JWT cannot be verified because the OpenID provider is
// unreachable. Internal error text never reaches a client.
//
// # Mounting
//
// [New] returns a handler that routes the full paths itself (/api/v1/...): mount it at
// "/api/v1/" without stripping the prefix.
package api
