package ticket_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/store"
	"github.com/redrive/redrive/ticket"
)

// A Jira issue opened from a group whose failures hold a secret in their key, value and
// headers carries no payload bytes, whatever placeholders its templates use.
func TestTicketCarriesNoPayload(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-5e1b-03d9-c7aa"
	pool := testkit.Postgres(t)
	s, err := store.New(store.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	id := testkit.InsertFailure(t, pool, testkit.FailureRow{ErrorCode: "SECRET_TEST", Key: []byte(secret),
		Value: []byte(`{"ssn":"` + secret + `"}`), HeaderNames: []string{"x-secret"}, HeaderValues: [][]byte{[]byte(secret)}})
	var groupID int64
	if err := pool.QueryRow(context.Background(), "SELECT group_id FROM failures WHERE id = $1", id).Scan(&groupID); err != nil {
		t.Fatal(err)
	}
	g, err := s.GroupByID(context.Background(), groupID)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"key":"OPS-1"}`))
	}))
	defer srv.Close()
	every := "{group_id} {service} {source} {message_type} {error_code} {stack_trace_hash} {count} {open} {first_seen} {last_seen} {ticket} {link}"
	summary, err := ticket.ParseTemplate("summary", every)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := ticket.ParseTemplate("description", every)
	if err != nil {
		t.Fatal(err)
	}
	j, err := ticket.NewJira(ticket.JiraConfig{URL: srv.URL, User: "ops", Token: "t", Project: "OPS", IssueType: "Bug",
		Summary: summary, Description: desc, BaseURL: "https://redrive.example"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "SECRET_TEST") {
		t.Fatalf("the body is not the group's: %s", body)
	}
	if strings.Contains(body, secret) || strings.Contains(body, base64.StdEncoding.EncodeToString([]byte(secret))) {
		t.Errorf("the ticket body carries the secret: %s", body)
	}
}
