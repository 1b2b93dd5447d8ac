// Package web is redrive's operator UI: server-rendered pages (html/template) with a little
// vanilla JavaScript, all embedded in the binary. No build step, no CDN.
//
// The pages are the overview (counts by state and temporality, top topics and services, the
// oldest open failure, failures over time as an inline SVG chart), the failure list (a total
// counted up to operator.TotalCap, filters and an advanced search kept in the address and
// offered back from local storage, keyset paging with first, previous and next links, the
// error message in each row, tombstone and source badges, retry or close of selected rows or
// of every failure matching the filter after a dry-run count), the result of an action (a
// redirect after the POST to an address that carries the signed result, so that a reload
// acts on nothing), the failure detail (metadata with the source, error, stack trace,
// headers, the value as JSON, hex, text and Avro or the tombstone notice, the attempt chain
// and the audit log), the groups (filters, counts, first and last seen, a sample error
// message, ticket and note) and a group's page (its failures, paged, and its audit log).
//
// Jobs and reactivations: a retry or close of a selection of any size runs as a job of the
// core, previewed first (the pinned count, the reason, the rate limit), started with the
// preview's token, then followed on its page (progress, rate, ETA, items by outcome, audit),
// paused, resumed or canceled; an admin reactivates the service's own dead-letter topic. The
// pages of a running job or run poll a small JSON view of its progress from the page's
// script and update without a reload.
//
// Every page is a thin translator over the operator core ([operator.Core]), which the REST
// API uses too: a handler parses its input (a filter with [operator.ParseFilter]), calls one
// method of the core and renders the result. The UI therefore follows the API's rules: an
// action by filter needs at least one criterion and may act on at most the core's MaxBulk
// failures (the confirmation, a dry run of the action, counts them; beyond the cap the action
// is refused with the core's message), a close needs a reason, and the result page counts
// every outcome and shows each failure not changed with its state before and after and why.
// The Avro view is the core's payload decoder's; the UI decodes nothing itself.
//
// # Security
//
// A user signs in with an API token, verified by the [auth.Authenticator] that the API shares,
// or, with Config.OIDC, at the OpenID provider (authorization code flow with PKCE; the sign-in
// in progress is kept in a cookie sealed with AES-GCM under a key derived from the session key,
// see oidc.go; the token form stays for when the provider is down). Either starts a
// server-side session (Config.Sessions): the browser holds only its random secret, so that a
// sign-out or an admin's revocation (the sessions page) ends it at once on every instance and
// a replayed cookie is refused (session.go, sessions_page.go). Behind a trusted proxy the
// proxy's identity is used instead, and a trusted proxy that sends no usable user name gets a
// 401 page, never a session. Every POST carries a CSRF token, an HMAC of the session cookie,
// and is refused when a browser says it comes from another site. Every value is escaped by
// html/template; the Content-Security-Policy allows no inline script or style. Viewers see no
// action buttons and their POSTs are refused.
//
// Stored text that reaches a page (error codes, messages, descriptions, stack traces and
// their hashes, topics, services, message types, group fields, audit principals and reasons)
// goes through one template function, "visible", that writes every code point a reader would
// not see or that reorders the text around it (bidirectional overrides and isolates,
// zero-width and other formatting characters, C0 and C1 controls but newline and tab) as
// ⟨U+XXXX⟩, and bytes that are not UTF-8 as ⟨0xNN⟩: a spoofed error code cannot pass for
// another.
//
// # Payloads
//
// Bytes are shown as they are: the hex view prints '.' for every byte outside 0x20–0x7e, the
// text view escapes bytes that are not UTF-8 or are control characters as \xNN, and invisible
// or reordering code points as \uNNNN (\UNNNNNNNN beyond the first plane). Keys, values and
// header values keep null apart from empty.
package web
