// Package api is redrive's REST API for operators and tools (chi/v5, JSON in snake_case, under
// /api/v1): browse and filter failures with keyset pagination, inspect one with its payload,
// headers, attempt chain and audit trail, retry and close one or many (by ids or by filter, with
// a dry run), edit failure groups, and read counts. The OpenAPI 3 document of every route is
// served at /api/v1/openapi.json.
//
// Every error is an RFC 9457 problem document (application/problem+json) whose detail names the
// field at fault: 400 for malformed input, 401/403 for authentication and roles, 404 for an
// unknown id, 409 for an action the failure's state does not allow, 413 for a body over the
// limit, 422 for a well-formed request that cannot be served as asked.
//
// # Authentication and roles
//
// An [Authenticator] finds the [Principal] of a request: a user named by a trusted
// authenticating proxy (e.g. oauth2-proxy, only from the configured proxy addresses), or a
// bearer token (only SHA-256 hashes are kept, compared in constant time). Roles are ordered:
// viewer reads, operator also retries, closes and edits groups, admin may do everything.
// [Authenticator.Middleware], [RequireRole] and [PrincipalFrom] are exported so that other
// handlers (the web UI) authenticate the same way. Every mutation writes an audit log entry
// with the principal, the action, the reason and the affected ids.
//
// # Mounting
//
// [New] returns a handler that routes the full paths itself (/api/v1/...): mount it at
// "/api/v1/" without stripping the prefix. [Config.Validate] refuses a configuration without
// authentication unless --insecure-no-auth was given.
package api
