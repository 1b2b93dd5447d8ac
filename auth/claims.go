package auth

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"
)

// ClaimPath names a claim inside a token's claims: the names of the nested objects down to the
// claim, e.g. ["realm_access", "roles"] for Keycloak's realm roles.
type ClaimPath []string

// String returns the path as ParseClaimPaths reads it (dots, a literal dot as "\.").
func (p ClaimPath) String() string {
	parts := make([]string, len(p))
	for i, s := range p {
		parts[i] = strings.ReplaceAll(s, ".", `\.`)
	}
	return strings.Join(parts, ".")
}

// ParseClaimPaths reads comma-separated claim paths, each a dot-separated path into nested
// claims: "groups", "roles", "realm_access.roles", "resource_access.redrive.roles". A dot that
// is part of a name is written "\." (a client "my.app": "resource_access.my\.app.roles").
func ParseClaimPaths(spec string) ([]ClaimPath, error) {
	var out []ClaimPath
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		var p ClaimPath
		var cur strings.Builder
		for i := 0; i < len(s); i++ {
			switch {
			case s[i] == '\\' && i+1 < len(s) && s[i+1] == '.':
				cur.WriteByte('.')
				i++
			case s[i] == '.':
				p = append(p, cur.String())
				cur.Reset()
			default:
				cur.WriteByte(s[i])
			}
		}
		p = append(p, cur.String())
		for _, name := range p {
			if name == "" {
				return nil, fmt.Errorf("claim path %q has an empty name", s)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// lookup returns the value at path in claims, and whether it is there.
func (p ClaimPath) lookup(claims map[string]any) (any, bool) {
	var cur any = claims
	for _, name := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

// roleValues returns the values of every path found in claims (a string, or an array of
// strings), and whether any path was found.
func roleValues(claims map[string]any, paths []ClaimPath) ([]string, bool) {
	var out []string
	found := false
	for _, p := range paths {
		if v, ok := p.lookup(claims); ok {
			found = true
			out = append(out, claimValues(v)...)
		}
	}
	return out, found
}

// claimValues returns a claim that is a string or an array of strings as strings.
func claimValues(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case []string:
		return x
	}
	return nil
}

// claimNames returns the top-level claim names of claims, sorted, for a log line that must
// not quote values.
func claimNames(claims map[string]any) []string {
	names := make([]string, 0, len(claims))
	for n := range claims {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AuditName returns the name under which the audit log records a principal of method with
// name (a token's name, a proxy's user). It says where the identity came from, so that no
// two principals of different origins share a name: "token:ada", "proxy:ada"; see OIDCName for
// OpenID Connect.
func AuditName(method, name string) string {
	switch method {
	case MethodToken, MethodProxy:
		return method + ":" + name
	}
	return name
}

// OIDCName returns the audit name of an OpenID Connect subject: "oidc:" the issuer, "#" the
// subject (escaped as in a URL query, so that it holds no space), and the display name in
// parentheses when there is one: "oidc:https://idp.example/realms/x#f1c2 (alice)". The issuer
// and subject identify the user for good; the display name may change.
func OIDCName(issuer, subject, display string) string {
	name := "oidc:" + issuer + "#" + url.QueryEscape(subject)
	if display != "" {
		name += " (" + display + ")"
	}
	if utf8.RuneCountInString(name) > 400 {
		name = string([]rune(name)[:400])
	}
	return name
}
