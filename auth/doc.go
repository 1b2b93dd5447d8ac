// Package auth decides who sends a request and what they may do: the roles (viewer, operator,
// admin, ordered), the [Principal] written to the audit log, and one [Authenticator] that the
// REST API and the web UI share. It knows these ways in:
//
//   - Bearer tokens ("name:role:secret", see [ParseTokens] and [LoadTokenFile]). Only the
//     SHA-256 hash of a secret is kept, and a presented token is compared with every
//     configured hash in constant time.
//   - A trusted authenticating proxy (e.g. oauth2-proxy): from the configured addresses only,
//     the user and groups headers name the principal and its role ([ParseProxyRoles]). A user
//     name that is empty once control characters and invalid UTF-8 are dropped is refused.
//   - OpenID Connect ([NewOIDC]): the UI's sign-in (authorization code flow with PKCE) and JWT
//     access tokens on the API. Tokens are verified here, not by a library with leeways of
//     its own: a signature by a key of the provider's key set (cached for a bounded lifetime
//     that honours Cache-Control; an unknown key id refetches at most once per interval, one
//     fetch shared by concurrent requests), the issuer, the audience, that an API token is an
//     access token, and exp/nbf/iat with exactly the configured skew. Roles come from claim
//     paths ([ParseClaimPaths]) of the ID token, or of UserInfo when it lacks them.
//   - Server-side sessions of the UI ([Sessions] over a [SessionStore], in Postgres): the
//     browser holds a random secret only, so that sign-out and revocation end a session on
//     every instance at once.
//
// Every principal's audit name says where it came from ([AuditName], [OIDCName]): "token:ada",
// "proxy:ada", "oidc:<issuer>#<subject> (ada)". A proxy identity takes precedence over a token
// on the same request. An unreachable provider is [ErrProviderUnavailable] (the API answers
// 503), never a refusal. With [Config.InsecureNoAuth] and nothing else configured, every
// request is the admin "anonymous" (demos only). Every failure to authenticate wraps [ErrUnauthenticated]; its text
// is safe to show to the client and holds no secret.
package auth
