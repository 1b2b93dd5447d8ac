package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
)

// Sessions are found by the hash of their secret until they expire, touched, listed newest
// first, and deleted by secret, by id or by expiry.
func TestSessions(t *testing.T) {
	t.Parallel()
	s, err := store.New(store.Config{Pool: testkit.Postgres(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	p := auth.Principal{Name: "oidc:https://idp.example#u-1 (alice)", Display: "alice", Method: auth.MethodOIDC, Subject: "u-1", Role: auth.RoleOperator, Payload: true}
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	if err := s.CreateSession(ctx, a, auth.Session{ID: "00000000-0000-4000-8000-00000000000a", Principal: p, IDToken: "x.y.z",
		Created: now, LastSeen: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, b, auth.Session{ID: "00000000-0000-4000-8000-00000000000b", Principal: auth.Principal{Name: "token:ada",
		Display: "ada", Method: auth.MethodToken, Role: auth.RoleAdmin}, Created: now.Add(time.Second), LastSeen: now, Expires: now.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SessionByHash(ctx, a, now)
	if err != nil || got.Principal != p || got.IDToken != "x.y.z" || !got.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("SessionByHash = %+v, %v", got, err)
	}
	if err := s.TouchSession(ctx, a, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SessionByHash(ctx, a, now); !got.LastSeen.Equal(now.Add(time.Minute)) {
		t.Errorf("last seen %v after the touch", got.LastSeen)
	}
	list, err := s.ListSessions(ctx, now, 10)
	if err != nil || len(list) != 2 || list[0].Principal.Name != "token:ada" || list[1].ID != "00000000-0000-4000-8000-00000000000a" {
		t.Fatalf("ListSessions = %+v, %v", list, err)
	}
	if _, err := s.SessionByHash(ctx, b, now.Add(3*time.Minute)); !errors.Is(err, auth.ErrSessionNotFound) {
		t.Errorf("expired session: %v", err)
	}
	if n, err := s.DeleteExpiredSessions(ctx, now.Add(3*time.Minute)); err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions = %d, %v", n, err)
	}
	if _, err := s.DeleteSession(ctx, "00000000-0000-4000-8000-00000000000b", "token:root"); !errors.Is(err, auth.ErrSessionNotFound) {
		t.Errorf("delete an expired and removed session: %v", err)
	}
	if got, err := s.DeleteSessionByHash(ctx, a); err != nil || got.Principal.Display != "alice" {
		t.Errorf("DeleteSessionByHash = %+v, %v", got, err)
	}
	if _, err := s.SessionByHash(ctx, a, now); !errors.Is(err, auth.ErrSessionNotFound) {
		t.Errorf("after sign-out: %v", err)
	}
}
