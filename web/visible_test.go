package web

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/internal/testkit"
	"github.com/redrive/redrive/operator"
)

func TestVisible(t *testing.T) {
	t.Parallel()
	s := "x"
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"plain text, ünïcödé, 日本", "plain text, ünïcödé, 日本"},
		{"line\n\ttab", "line\n\ttab"},
		{"user\u202etxt.exe", "user⟨U+202E⟩txt.exe"},
		{"a\u200bb\u200c\u200d\u2060\ufeff", "a⟨U+200B⟩b⟨U+200C⟩⟨U+200D⟩⟨U+2060⟩⟨U+FEFF⟩"},
		{"\u2066iso\u2069 \u061c \u00ad", "⟨U+2066⟩iso⟨U+2069⟩ ⟨U+061C⟩ ⟨U+00AD⟩"},
		{"nul\x00 esc\x1b cr\r del\x7f", "nul⟨U+0000⟩ esc⟨U+001B⟩ cr⟨U+000D⟩ del⟨U+007F⟩"},
		{"c1\u0085\u009b", "c1⟨U+0085⟩⟨U+009B⟩"},
		{"sep\u2028\u2029", "sep⟨U+2028⟩⟨U+2029⟩"},
		{"tag\U000E0041", "tag⟨U+E0041⟩"},
		{"filler\u3164", "filler⟨U+3164⟩"},
		{"bad\xff\xfe", "bad⟨0xFF⟩⟨0xFE⟩"},
		{"a\ufffdb", "a\ufffdb"}, // a replacement character that is in the text is text
		{&s, "x"},
		{(*string)(nil), ""},
		{nil, ""},
		{[]byte("b\u202e"), "b⟨U+202E⟩"},
		{redrive.Outcome("not\u200bfound"), "not⟨U+200B⟩found"},
		{42, "42"},
	} {
		if got := visible(tc.in); got != tc.want {
			t.Errorf("visible(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// spoof holds a right-to-left override and a zero-width space: stored text that must never
// reach a page as it is.
const spoof = "\u202e\u200b"

// Every page that shows stored text shows the invisible and reordering code points in it as
// ⟨U+XXXX⟩: error codes, messages, descriptions, stack traces and their hashes, topics,
// services, message types, groups (code, hash, ticket, note) and audit principals.
func TestSpoofableTextIsVisible(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := testkit.InsertFailure(t, f.pool, testkit.FailureRow{
		Topic: "pay" + spoof + "ments", ErrorCode: "CODE" + spoof + "X", ErrorMessage: "message " + spoof + " text",
		PublisherService: "svc" + spoof, MessageType: "Type" + spoof,
	})
	var group int64
	if err := f.pool.QueryRow(ctx, `
		UPDATE failures SET error_description = $2, stack_trace = $3, stack_trace_hash = $4 WHERE id = $1
		RETURNING group_id`, id, "description "+spoof, "at Foo"+spoof+"\n\tat Bar", "hash"+spoof).Scan(&group); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE failure_groups SET stack_trace_hash = $2, ticket = $3, note = $4 WHERE id = $1`,
		group, "hash"+spoof, "https://t.example/"+spoof, "note "+spoof); err != nil {
		t.Fatal(err)
	}

	c := f.client()
	c.login(operatorToken)
	tok := c.csrf("/failures")
	pages := map[string]string{}
	get := func(name, path string) {
		resp, body := c.do("GET", path, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", name, resp.StatusCode)
		}
		pages[name] = body
	}
	get("overview", "/")
	get("list", "/failures")
	get("groups", "/groups")
	get("detail", "/failures/"+id.String())
	_, pages["confirm"] = c.do("POST", "/failures/confirm", url.Values{"csrf": {tok}, "action": {"close"}, "id": {id.String()}})

	// An audit entry by a principal whose name holds them too (the core takes any name; the
	// authenticator cleans those it gets from a proxy).
	if _, err := f.core.Act(ctx, operator.ActionRequest{Action: operator.Close, Principal: "mallory" + spoof, Reason: "why" + spoof,
		Selection: operator.Selection{IDs: []uuid.UUID{id}}}); err != nil {
		t.Fatal(err)
	}
	get("detail after close", "/failures/"+id.String())
	_, pages["result"] = c.do("POST", "/failures/close", url.Values{"csrf": {tok}, "reason": {"again"}, "id": {id.String()}})

	for name, body := range pages {
		// html/template writes the "+" of ⟨U+XXXX⟩ as &#43;: the checks below read the text a
		// browser shows; neither it nor the HTML may hold the code points raw.
		shown := html.UnescapeString(body)
		for _, text := range []string{body, shown} {
			for _, r := range spoof {
				if i := strings.IndexRune(text, r); i >= 0 {
					t.Errorf("%s shows U+%04X raw: …%s…", name, r, text[max(0, i-80):min(len(text), i+40)])
				}
			}
		}
		pages[name] = shown
	}
	for name, wants := range map[string][]string{
		"overview": {"pay⟨U+202E⟩⟨U+200B⟩ments", "svc⟨U+202E⟩⟨U+200B⟩"},
		"list":     {"pay⟨U+202E⟩⟨U+200B⟩ments", "CODE⟨U+202E⟩⟨U+200B⟩X", "svc⟨U+202E⟩⟨U+200B⟩", "Type⟨U+202E⟩⟨U+200B⟩", "message ⟨U+202E⟩⟨U+200B⟩ text"},
		"groups":   {"CODE⟨U+202E⟩⟨U+200B⟩X", "hash⟨U+202E⟩⟨U+200B⟩", "https://t.example/⟨U+202E⟩⟨U+200B⟩", "note ⟨U+202E⟩⟨U+200B⟩"},
		"detail": {"CODE⟨U+202E⟩⟨U+200B⟩X", "message ⟨U+202E⟩⟨U+200B⟩ text", "description ⟨U+202E⟩⟨U+200B⟩",
			"at Foo⟨U+202E⟩⟨U+200B⟩\n\tat Bar", "hash⟨U+202E⟩⟨U+200B⟩", "pay⟨U+202E⟩⟨U+200B⟩ments", "svc⟨U+202E⟩⟨U+200B⟩", "Type⟨U+202E⟩⟨U+200B⟩"},
		"detail after close": {"mallory⟨U+202E⟩⟨U+200B⟩", "why⟨U+202E⟩⟨U+200B⟩"},
	} {
		for _, want := range wants {
			if !strings.Contains(pages[name], want) {
				t.Errorf("%s does not show %q", name, want)
			}
		}
	}
	if strings.Contains(pages["groups"], `href="https://t.example/`) {
		t.Error("a ticket with invisible characters is a link")
	}

	// The group form shows the ticket as visible text too; saved unchanged, the ticket is
	// kept as stored, not replaced by what the form showed.
	g := strconv.FormatInt(group, 10)
	shownTicket := visible("https://t.example/" + spoof)
	resp, _ := c.do("POST", "/groups/"+g, url.Values{"csrf": {tok}, "ticket": {shownTicket}, "ticket_shown": {shownTicket},
		"note": {"reviewed"}, "note_shown": {visible("note " + spoof)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("group edit: %d", resp.StatusCode)
	}
	grp, err := f.store.GroupByID(ctx, group)
	if err != nil || grp.Ticket == nil || *grp.Ticket != "https://t.example/"+spoof || grp.Note == nil || *grp.Note != "reviewed" {
		t.Fatalf("group after an edit of its note: %+v, %v", grp, err)
	}
}
