// Package web is redrive's operator UI: server-rendered pages (html/template) with a little
// vanilla JavaScript, all embedded in the binary. No build step, no CDN.
//
// The pages are the overview (counts by state and temporality, top topics and services, the
// oldest open failure, failures over time as an inline SVG chart), the failure list (filters
// kept in the address and offered back from local storage, keyset paging, retry or close of
// selected rows or of every failure matching the filter after a dry-run count), the failure
// detail (metadata, error, stack trace, headers, the value as JSON, hex, text and Avro, the
// attempt chain and the audit log) and the groups (counts, first and last seen, ticket and
// note).
//
// # Security
//
// A user signs in with an API token, kept in an HttpOnly, SameSite=Strict cookie and verified
// on every request by the same [Authenticator] as the API; behind a trusted proxy the proxy's
// identity is used instead. Every POST carries a CSRF token, an HMAC of the session cookie,
// and is refused when a browser says it comes from another site. Every value is escaped by
// html/template; the Content-Security-Policy allows no inline script or style. Viewers see no
// action buttons and their POSTs are refused.
//
// # Payloads
//
// Bytes are shown as they are: the hex view prints '.' for every byte outside 0x20–0x7e, the
// text view escapes bytes that are not UTF-8 or are control characters as \xNN, and invisible
// or reordering code points (bidirectional overrides, zero-width characters) as \uNNNN. Keys,
// values and header values keep null apart from empty.
//
// The UI reaches the failures through a [Backend]; [StoreBackend] implements it on the store
// and the resender.
package web
