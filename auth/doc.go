// Package auth decides who sends a request and what they may do: the roles (viewer, operator,
// admin, ordered), the [Principal] written to the audit log, and one [Authenticator] that the
// REST API and the web UI share. It knows two ways in:
//
//   - Bearer tokens ("name:role:secret", see [ParseTokens] and [LoadTokenFile]). Only the
//     SHA-256 hash of a secret is kept, and a presented token is compared with every
//     configured hash in constant time.
//   - A trusted authenticating proxy (e.g. oauth2-proxy): from the configured addresses only,
//     the user and groups headers name the principal and its role ([ParseProxyRoles]). A user
//     name that is empty once control characters and invalid UTF-8 are dropped is refused.
//
// A proxy identity takes precedence over a token on the same request. With
// [Config.InsecureNoAuth] and nothing else configured, every request is the admin
// "anonymous" (demos only). Every failure to authenticate wraps [ErrUnauthenticated]; its text
// is safe to show to the client and holds no secret.
package auth
