package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// signingAlgorithms are the JWS algorithms a token may be signed with: asymmetric ones only
// ("none" and the HMAC algorithms, whose key would be public, never verify).
var signingAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// tokenKind is what a verified JWT must be.
type tokenKind int

const (
	// idToken is an ID token of redrive's sign-in: audience the client id, with a nonce.
	idToken tokenKind = iota
	// accessToken is an API bearer token: "typ" at+jwt (RFC 9068) with the configured
	// audience, or any JWT with a configured audience distinct from the client id that is not
	// an ID token.
	accessToken
)

// verifiedToken is a JWT whose signature, issuer, audience and times were checked.
type verifiedToken struct {
	claims  map[string]any
	expiry  time.Time
	subject string
}

// tokenError is a refused token with the reason to give the client.
func tokenError(reason string) error {
	return fmt.Errorf("%w: the JWT is not valid: %s", ErrUnauthenticated, reason)
}

// verify checks raw as a token of kind: a signature by a key of the provider's key set, the
// issuer, the audience, and exp/nbf/iat with exactly the configured clock skew. The error
// wraps ErrUnauthenticated (the reason, never the token) or ErrProviderUnavailable.
func (o *OIDC) verify(ctx context.Context, raw string, kind tokenKind) (*verifiedToken, error) {
	jws, err := jose.ParseSigned(raw, signingAlgorithms)
	if err != nil {
		if strings.Contains(err.Error(), "algorithm") {
			return nil, tokenError("bad signature (algorithm not allowed)")
		}
		return nil, tokenError("malformed")
	}
	if len(jws.Signatures) != 1 {
		return nil, tokenError("malformed (not one signature)")
	}
	h := jws.Signatures[0].Header
	typ, _ := h.ExtraHeaders[jose.HeaderType].(string)
	typ = strings.ToLower(strings.TrimPrefix(strings.ToLower(typ), "application/"))
	doc, err := o.discover(ctx)
	if err != nil {
		return nil, err
	}
	key, err := doc.keys.key(ctx, h.KeyID, h.Algorithm)
	if errors.Is(err, errUnknownKey) {
		return nil, tokenError("bad signature (unknown signing key)")
	}
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, tokenError("bad signature")
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, tokenError("malformed claims")
	}
	if iss, _ := claims["iss"].(string); iss != doc.Issuer {
		return nil, tokenError(fmt.Sprintf("issuer mismatch: issued by %q, the configured issuer is %q", sanitizeOAuth(iss, 200), doc.Issuer))
	}
	aud := claimValues(claims["aud"])
	switch kind {
	case idToken:
		if !contains(aud, o.cfg.ClientID) {
			return nil, tokenError("wrong audience")
		}
		if len(aud) > 1 {
			if azp, _ := claims["azp"].(string); azp != "" && azp != o.cfg.ClientID {
				return nil, tokenError("wrong authorized party")
			}
		}
	case accessToken:
		if !contains(aud, o.cfg.Audience) {
			return nil, tokenError("wrong audience")
		}
		if typ != "at+jwt" {
			// Not typed as an access token: only with an audience of its own, and never an
			// ID token (whose audience is the client id, and that carries a nonce or says so).
			if o.cfg.Audience == o.cfg.ClientID {
				return nil, tokenError(`not an access token (its "typ" is not at+jwt, and the audience is the client id)`)
			}
			ct, _ := claims["typ"].(string)
			if _, hasNonce := claims["nonce"]; hasNonce || strings.EqualFold(ct, "ID") || typ == "id_token" {
				return nil, tokenError("an ID token is not an access token")
			}
		}
	}
	now, skew := o.cfg.Now(), o.cfg.ClockSkew
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return nil, tokenError("no expiry")
	}
	if !now.Before(exp.Add(skew)) {
		return nil, tokenError("expired")
	}
	if nbf, ok := numericDate(claims["nbf"]); ok && now.Add(skew).Before(nbf) {
		return nil, tokenError("not valid yet")
	}
	if iat, ok := numericDate(claims["iat"]); ok && now.Add(skew).Before(iat) {
		return nil, tokenError("not valid yet (issued in the future)")
	}
	sub, _ := claims["sub"].(string)
	return &verifiedToken{claims: claims, expiry: exp, subject: sub}, nil
}

// numericDate reads a JWT NumericDate claim (seconds since the epoch, possibly fractional).
func numericDate(v any) (time.Time, bool) {
	f, ok := v.(float64)
	if !ok {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
