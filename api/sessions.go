package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/redrive/redrive/auth"
)

// sessionJSON is one signed-in session of the UI (never its secret, nor the ID token).
type sessionJSON struct {
	ID          string    `json:"id"`
	Principal   string    `json:"principal"`
	DisplayName string    `json:"display_name"`
	Method      string    `json:"method"`
	Role        string    `json:"role"`
	Payload     bool      `json:"payload"`
	UserAgent   string    `json:"user_agent"`
	RemoteAddr  string    `json:"remote_addr"`
	CreatedAt   time.Time `json:"created_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// listSessions serves GET /sessions: the UI's live sessions, newest first, for admins.
func (a *api) listSessions(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, []string{"limit"})
	limit := 0
	if err == nil {
		limit, err = parseLimit(q)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if a.cfg.Sessions == nil {
		writeJSON(w, http.StatusOK, map[string]any{"data": []sessionJSON{}, "next_cursor": nil})
		return
	}
	list, err := a.cfg.Sessions.List(r.Context(), limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]sessionJSON, 0, len(list))
	for _, s := range list {
		p := s.Principal
		out = append(out, sessionJSON{ID: s.ID, Principal: p.Name, DisplayName: p.DisplayName(), Method: p.Method,
			Role: p.Role.String(), Payload: p.CanReadPayload(), UserAgent: s.UserAgent, RemoteAddr: s.RemoteAddr,
			CreatedAt: s.Created.UTC(), LastSeenAt: s.LastSeen.UTC(), ExpiresAt: s.Expires.UTC()})
	}
	// At most one page: the sessions are few, and the newest are the ones worth revoking.
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "next_cursor": nil})
}

// revokeSession serves DELETE /sessions/{id}: an admin ends a session, on every instance at
// once.
func (a *api) revokeSession(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Sessions == nil {
		writeProblem(w, r, http.StatusNotFound, "id", "no such session")
		return
	}
	s, err := a.cfg.Sessions.Revoke(r.Context(), chi.URLParam(r, "id"), principal(r).Name)
	if errors.Is(err, auth.ErrSessionNotFound) {
		writeProblem(w, r, http.StatusNotFound, "id", "no such session (ended, expired or never started)")
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("api: session revoked", "session", s.ID, "of", s.Principal.Name, "by", principal(r).Name)
	w.WriteHeader(http.StatusNoContent)
}
