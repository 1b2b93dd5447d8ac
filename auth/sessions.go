package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// ErrSessionNotFound means there is no live session with the given secret or id: it never
// existed, was ended (sign-out, revocation) or has expired.
var ErrSessionNotFound = errors.New("session not found")

// Session is a signed-in user's session of the UI, kept server-side: the browser holds only
// a random secret, whose SHA-256 is the session's key in the store.
type Session struct {
	// ID is the session's public id, for lists and revocation; the secret is never shown.
	ID string
	// Principal is the signed-in principal as it was at sign-in.
	Principal Principal
	// IDToken is the OpenID provider's ID token of an OIDC session, sent as id_token_hint at
	// sign-out; empty for others.
	IDToken string
	// UserAgent and RemoteAddr describe where the sign-in came from, for the list.
	UserAgent, RemoteAddr string
	// Created, LastSeen and Expires are when the session started, was last used (updated at
	// most once a minute) and ends.
	Created, LastSeen, Expires time.Time
}

// SessionStore keeps sessions; store.Store implements it in Postgres, so that every instance
// sees a session end at once. Secrets reach it only as their SHA-256.
type SessionStore interface {
	// CreateSession stores s under hash.
	CreateSession(ctx context.Context, hash [32]byte, s Session) error
	// SessionByHash returns the session of hash that expires after now, or ErrSessionNotFound.
	SessionByHash(ctx context.Context, hash [32]byte, now time.Time) (Session, error)
	// TouchSession sets the session's last use to now.
	TouchSession(ctx context.Context, hash [32]byte, now time.Time) error
	// DeleteSessionByHash ends the session of hash and returns it, or ErrSessionNotFound.
	DeleteSessionByHash(ctx context.Context, hash [32]byte) (Session, error)
	// DeleteSession ends the session with public id, revoked by the principal named by (an
	// audit name), and records that in the audit log; ErrSessionNotFound when there is none.
	DeleteSession(ctx context.Context, id, by string) (Session, error)
	// ListSessions returns up to limit sessions that expire after now, the most recently
	// started first.
	ListSessions(ctx context.Context, now time.Time, limit int) ([]Session, error)
	// DeleteExpiredSessions removes the sessions that expired before now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error)
}

// Defaults and bounds of SessionsConfig.
const (
	DefaultSessionMaxAge = 8 * time.Hour
	MaxSessionMaxAge     = 7 * 24 * time.Hour
	// MaxSessionList bounds a list of sessions.
	MaxSessionList = 500
	// touchEvery bounds how often a session's last use is written.
	touchEvery = time.Minute
)

// SessionsConfig configures Sessions.
type SessionsConfig struct {
	// Store keeps the sessions. Required.
	Store SessionStore
	// MaxAge bounds a session: it ends this long after sign-in at the latest (an OIDC session
	// at the ID token's expiry when that comes first). Defaults to 8h, at most 7 days.
	MaxAge time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Sessions starts, finds, lists and ends the UI's server-side sessions. It is safe for
// concurrent use.
type Sessions struct {
	cfg SessionsConfig
}

// NewSessions returns Sessions for cfg.
func NewSessions(cfg SessionsConfig) (*Sessions, error) {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("invalid config: the session store is required"))
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultSessionMaxAge
	}
	if cfg.MaxAge < time.Minute || cfg.MaxAge > MaxSessionMaxAge {
		errs = append(errs, fmt.Errorf("invalid config: session max age %s is not between 1m and %s", cfg.MaxAge, MaxSessionMaxAge))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Sessions{cfg: cfg}, nil
}

// MaxAge returns the configured bound of a session's life.
func (s *Sessions) MaxAge() time.Duration { return s.cfg.MaxAge }

// NewSession is what Start needs.
type NewSession struct {
	// Principal is the signed-in principal (token or OIDC).
	Principal Principal
	// Until ends the session earlier than MaxAge (an ID token's expiry); zero for none.
	Until time.Time
	// IDToken is the OIDC ID token, for id_token_hint at sign-out.
	IDToken string
	// UserAgent and RemoteAddr describe the client.
	UserAgent, RemoteAddr string
}

// Start starts a session and returns the secret for the browser's cookie. It also removes
// expired sessions.
func (s *Sessions) Start(ctx context.Context, n NewSession) (string, Session, error) {
	now := s.cfg.Now()
	until := now.Add(s.cfg.MaxAge)
	if !n.Until.IsZero() && n.Until.Before(until) {
		until = n.Until
	}
	if !now.Before(until) {
		return "", Session{}, fmt.Errorf("%w: the session would have expired already", ErrUnauthenticated)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	secret := base64.RawURLEncoding.EncodeToString(b)
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	id[6] = id[6]&0x0f | 0x40 // a version 4 UUID
	id[8] = id[8]&0x3f | 0x80
	sess := Session{
		ID:        fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:]),
		Principal: n.Principal, IDToken: n.IDToken,
		UserAgent: bound(n.UserAgent, 300), RemoteAddr: bound(n.RemoteAddr, 100),
		Created: now, LastSeen: now, Expires: until,
	}
	if _, err := s.cfg.Store.DeleteExpiredSessions(ctx, now); err != nil {
		return "", Session{}, fmt.Errorf("remove expired sessions: %w", err)
	}
	if err := s.cfg.Store.CreateSession(ctx, hashSecret(secret), sess); err != nil {
		return "", Session{}, fmt.Errorf("start session: %w", err)
	}
	return secret, sess, nil
}

// Lookup returns the live session of secret; an unknown, ended or expired one is an error
// wrapping ErrSessionNotFound.
func (s *Sessions) Lookup(ctx context.Context, secret string) (Session, error) {
	if !validSecret(secret) {
		return Session{}, ErrSessionNotFound
	}
	now := s.cfg.Now()
	h := hashSecret(secret)
	sess, err := s.cfg.Store.SessionByHash(ctx, h, now)
	if err != nil {
		return Session{}, err
	}
	if now.Sub(sess.LastSeen) >= touchEvery {
		if err := s.cfg.Store.TouchSession(ctx, h, now); err != nil && !errors.Is(err, ErrSessionNotFound) {
			return Session{}, fmt.Errorf("touch session: %w", err)
		}
		sess.LastSeen = now
	}
	return sess, nil
}

// End ends the session of secret (sign-out) and returns it; ErrSessionNotFound when there
// was none.
func (s *Sessions) End(ctx context.Context, secret string) (Session, error) {
	if !validSecret(secret) {
		return Session{}, ErrSessionNotFound
	}
	return s.cfg.Store.DeleteSessionByHash(ctx, hashSecret(secret))
}

// Revoke ends the session with public id (an administrator's revocation, by the principal
// named by, recorded in the audit log) and returns it; ErrSessionNotFound when there is none.
func (s *Sessions) Revoke(ctx context.Context, id, by string) (Session, error) {
	if !validSessionID(id) {
		return Session{}, ErrSessionNotFound
	}
	return s.cfg.Store.DeleteSession(ctx, id, by)
}

// List returns the live sessions, the most recently started first, at most limit (1 to
// MaxSessionList; other values mean MaxSessionList).
func (s *Sessions) List(ctx context.Context, limit int) ([]Session, error) {
	if limit < 1 || limit > MaxSessionList {
		limit = MaxSessionList
	}
	return s.cfg.Store.ListSessions(ctx, s.cfg.Now(), limit)
}

func hashSecret(secret string) [32]byte { return sha256.Sum256([]byte("redrive session\x00" + secret)) }

// validSecret reports whether v has the shape of a secret from Start.
func validSecret(v string) bool {
	if len(v) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil
}

// validSessionID reports whether v has the shape of a session's public id (a UUID).
func validSessionID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i, r := range v {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
				return false
			}
		}
	}
	return true
}

func bound(s string, n int) string {
	s = cleanName(s)
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n])
	}
	return s
}
