package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/auth"
)

// The UI's server-side sessions (table ui_sessions): Store implements auth.SessionStore.

var _ auth.SessionStore = (*Store)(nil)

const sessionColumns = `id::text, principal, display_name, method, subject, role, payload, id_token, user_agent, remote_addr,
	created_at, last_seen_at, expires_at`

// CreateSession stores a session under the hash of its secret.
func (s *Store) CreateSession(ctx context.Context, hash [32]byte, sess auth.Session) error {
	p := sess.Principal
	_, err := s.pool.Exec(ctx, `INSERT INTO ui_sessions (secret_hash, id, principal, display_name, method, subject, role, payload,
		id_token, user_agent, remote_addr, created_at, last_seen_at, expires_at)
		VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		hash[:], sess.ID, p.Name, p.DisplayName(), p.Method, p.Subject, p.Role.String(), p.CanReadPayload(),
		sess.IDToken, sess.UserAgent, sess.RemoteAddr, sess.Created, sess.LastSeen, sess.Expires)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// SessionByHash returns the session of hash that expires after now, or auth.ErrSessionNotFound.
func (s *Store) SessionByHash(ctx context.Context, hash [32]byte, now time.Time) (auth.Session, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM ui_sessions WHERE secret_hash = $1 AND expires_at > $2`, hash[:], now)
	return scanSession(row)
}

// TouchSession sets the last use of the session of hash to now.
func (s *Store) TouchSession(ctx context.Context, hash [32]byte, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE ui_sessions SET last_seen_at = $2 WHERE secret_hash = $1 AND last_seen_at < $2`, hash[:], now)
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return auth.ErrSessionNotFound
	}
	return nil
}

// DeleteSessionByHash ends the session of hash and returns it, or auth.ErrSessionNotFound.
func (s *Store) DeleteSessionByHash(ctx context.Context, hash [32]byte) (auth.Session, error) {
	return scanSession(s.pool.QueryRow(ctx, `DELETE FROM ui_sessions WHERE secret_hash = $1 RETURNING `+sessionColumns, hash[:]))
}

// DeleteSession ends the session with public id, revoked by the principal named by, and
// records the revocation in the audit log in the same transaction; auth.ErrSessionNotFound
// when there is no such session.
func (s *Store) DeleteSession(ctx context.Context, id, by string) (auth.Session, error) {
	var sess auth.Session
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		sess, err = scanSession(tx.QueryRow(ctx, `DELETE FROM ui_sessions WHERE id = $1::uuid RETURNING `+sessionColumns, id))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO audit_log (action, principal, details) VALUES ($1, $2, jsonb_build_object('session', $3::text, 'of', $4::text))`,
			AuditActionSessionRevoke, by, sess.ID, sess.Principal.Name)
		if err != nil {
			return fmt.Errorf("audit the revocation: %w", err)
		}
		return nil
	})
	if err != nil {
		return auth.Session{}, err
	}
	return sess, nil
}

// ListSessions returns up to limit sessions that expire after now, the most recently started
// first.
func (s *Store) ListSessions(ctx context.Context, now time.Time, limit int) ([]auth.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sessionColumns+` FROM ui_sessions WHERE expires_at > $1
		ORDER BY created_at DESC, id LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []auth.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// DeleteExpiredSessions removes the sessions that expired before now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

func scanSession(row pgx.Row) (auth.Session, error) {
	var sess auth.Session
	var role string
	p := &sess.Principal
	err := row.Scan(&sess.ID, &p.Name, &p.Display, &p.Method, &p.Subject, &role, &p.Payload, &sess.IDToken,
		&sess.UserAgent, &sess.RemoteAddr, &sess.Created, &sess.LastSeen, &sess.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Session{}, auth.ErrSessionNotFound
	}
	if err != nil {
		return auth.Session{}, fmt.Errorf("read session: %w", err)
	}
	if p.Role, err = auth.ParseRole(role); err != nil {
		return auth.Session{}, fmt.Errorf("read session: %w", err)
	}
	return sess, nil
}
