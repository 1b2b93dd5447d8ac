package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// MinTokenLen is the shortest plain-text token ParseTokens accepts.
const MinTokenLen = 16

// Token is an accepted bearer token: only the SHA-256 hash of its secret is kept.
type Token struct {
	// Name identifies the holder in the audit log.
	Name string
	// Role is what the holder may do.
	Role Role
	// Payload grants reading payload bytes and header values (implied by RoleAdmin).
	Payload bool
	// Hash is the SHA-256 of the secret.
	Hash [32]byte
}

// HashToken returns the hash form of a secret, "sha256:<hex>", for token files that should
// not hold secrets in plain text.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseTokens parses bearer tokens from spec: entries separated by commas or newlines, each
// "name:role:secret" where role is viewer, operator or admin and secret is either the token in
// plain text (at least MinTokenLen characters; hashed at once, never kept) or its hash as
// HashToken writes it ("sha256:" and 64 hex digits). Empty entries are skipped, so an empty
// spec gives no tokens. Names must be unique, and so must secrets.
func ParseTokens(spec string) ([]Token, error) {
	var entries []string
	for _, line := range strings.Split(spec, "\n") {
		entries = append(entries, strings.Split(line, ",")...)
	}
	return parseTokenEntries(entries, func(i int) string { return fmt.Sprintf("token entry %d", i+1) })
}

// LoadTokenFile reads bearer tokens from the file at path: one "name:role:secret" entry per
// line as in ParseTokens; blank lines and lines starting with # are skipped.
func LoadTokenFile(path string) ([]Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			line = ""
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	tokens, err := parseTokenEntries(lines, func(i int) string { return fmt.Sprintf("%s line %d", path, i+1) })
	if err != nil {
		return nil, err
	}
	return tokens, nil
}

func parseTokenEntries(entries []string, where func(int) string) ([]Token, error) {
	var tokens []Token
	names := map[string]bool{}
	hashes := map[[32]byte]bool{}
	for i, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		t, err := parseToken(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where(i), err)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("%s: token name %q is used twice", where(i), t.Name)
		}
		if hashes[t.Hash] {
			return nil, fmt.Errorf("%s: token %q has the same secret as another token", where(i), t.Name)
		}
		names[t.Name], hashes[t.Hash] = true, true
		tokens = append(tokens, t)
	}
	return tokens, nil
}

func parseToken(entry string) (Token, error) {
	parts := strings.SplitN(entry, ":", 3)
	if len(parts) != 3 {
		return Token{}, fmt.Errorf(`want "name:role:secret"`)
	}
	name, secret := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[2])
	if !validTokenName(name) {
		return Token{}, fmt.Errorf("token name %q: use 1 to 100 letters, digits and . _ @ -", name)
	}
	g, err := ParseGrant(parts[1])
	if err != nil {
		return Token{}, fmt.Errorf("token %q: %w", name, err)
	}
	t := Token{Name: name, Role: g.Role, Payload: g.Payload}
	if h, ok := strings.CutPrefix(secret, "sha256:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return Token{}, fmt.Errorf("token %q: a hashed secret is \"sha256:\" and 64 hex digits", name)
		}
		copy(t.Hash[:], b)
		return t, nil
	}
	if len(secret) < MinTokenLen {
		return Token{}, fmt.Errorf("token %q: the secret has %d characters, at least %d", name, len(secret), MinTokenLen)
	}
	t.Hash = sha256.Sum256([]byte(secret))
	return t, nil
}

func validTokenName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r)
		if !ok {
			return false
		}
	}
	return true
}

// ParseTrustedProxies parses a comma-separated list of IP addresses and CIDR prefixes
// ("10.0.0.5,10.1.0.0/16,::1").
func ParseTrustedProxies(spec string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// ParseProxyRoles parses a comma-separated list of "group=grant" mappings for the
// trusted-proxy mode and OIDC ("redrive-admins=admin,sre=operator+payload,staff=viewer"); see
// ParseGrant.
func ParseProxyRoles(spec string) (map[string]Grant, error) {
	out := map[string]Grant{}
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		group, grant, ok := strings.Cut(s, "=")
		group = strings.TrimSpace(group)
		if !ok || group == "" {
			return nil, fmt.Errorf("role mapping %q: want \"group=role\"", s)
		}
		g, err := ParseGrant(grant)
		if err != nil {
			return nil, fmt.Errorf("role mapping for group %q: %w", group, err)
		}
		if _, dup := out[group]; dup {
			return nil, fmt.Errorf("role mapping: group %q is mapped twice", group)
		}
		out[group] = g
	}
	return out, nil
}
