package web

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/redrive/redrive/auth"
)

// The administrators' page of the signed-in sessions: GET /sessions lists them, POST
// /sessions/{id}/revoke ends one (on every instance at once, as the session lives in the
// store).

// sessionsPage is the data of the sessions page.
type sessionsPage struct {
	Sessions []auth.Session
	// Own is the id of the viewer's own session; Revoked the id just revoked.
	Own, Revoked string
	Provider     string
}

func (h *handler) getSessions(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Sessions == nil {
		h.renderError(w, r, http.StatusNotFound, "This server keeps no sessions: its users come through a trusted proxy.")
		return
	}
	list, err := h.cfg.Sessions.List(r.Context(), auth.MaxSessionList)
	if err != nil {
		h.serverError(w, r, "list sessions", err)
		return
	}
	page := sessionsPage{Sessions: list, Own: sessionFrom(r.Context()).signedIn.ID, Provider: "single sign-on"}
	if h.cfg.OIDC != nil {
		page.Provider = h.cfg.OIDCName
	}
	if id := r.URL.Query().Get("revoked"); id != "" && len(id) <= 36 {
		page.Revoked = id
	}
	h.render(w, r, http.StatusOK, "sessions", "Sessions", page)
}

func (h *handler) postRevokeSession(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Sessions == nil {
		h.notFound(w, r)
		return
	}
	id := r.PathValue("id")
	sess, err := h.cfg.Sessions.Revoke(r.Context(), id, sessionFrom(r.Context()).principal.Name)
	switch {
	case errors.Is(err, auth.ErrSessionNotFound):
		h.renderError(w, r, http.StatusNotFound, "There is no such session: it has ended already.")
		return
	case err != nil:
		h.serverError(w, r, "revoke session", err)
		return
	}
	h.cfg.Logger.Info("web: session revoked", "session", sess.ID, "of", sess.Principal.Name, "by", sessionFrom(r.Context()).principal.Name)
	http.Redirect(w, r, "/sessions?revoked="+url.QueryEscape(sess.ID), http.StatusSeeOther)
}
