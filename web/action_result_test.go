package web

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive"

	"github.com/google/uuid"

	"github.com/redrive/redrive/operator"
)

func TestActionRecordRoundTripAndBounds(t *testing.T) {
	t.Parallel()
	h := &handler{cfg: Config{SessionKey: []byte(strings.Repeat("k", 32))}}
	res := &operator.ActionResult{Action: operator.Close, Matched: 13, Counts: map[redrive.Outcome]int{}}
	ok := uuid.New()
	res.Items = append(res.Items, operator.ItemOutcome{ID: ok, Outcome: operator.Close.Success()})
	for range 12 {
		res.Items = append(res.Items, operator.ItemOutcome{ID: uuid.New(), Outcome: "conflict", Before: redrive.StateResent,
			After: redrive.StateResent, Detail: strings.Repeat("ü", 500)})
	}
	res.Counts[operator.Close.Success()], res.Counts["conflict"] = 1, 12
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rec := newActionRecord(actionForm{Action: operator.Close, IDs: []uuid.UUID{ok}, Back: "/failures?topic=a"}, res, "olivia", at)
	if len(rec.Others) != maxResultItems || rec.MoreOthers != 2 || rec.Single != "/failures/"+ok.String() {
		t.Fatalf("record: %d others, %d more, single %q", len(rec.Others), rec.MoreOthers, rec.Single)
	}
	for _, o := range rec.Others {
		if len(o.Detail) > maxResultDetail+len("…") {
			t.Fatalf("detail of %d bytes", len(o.Detail))
		}
	}
	link, err := h.resultLink(rec)
	if err != nil {
		t.Fatal(err)
	}
	// The address stays well inside what browsers and proxies accept.
	if len(link) > 6000 {
		t.Errorf("result address of %d bytes", len(link))
	}
	u, err := url.Parse(link)
	if err != nil || u.Path != "/failures/result" {
		t.Fatalf("link %q: %v", link, err)
	}
	got, err := h.readResult(u.Query().Get(paramResult))
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, got, rec)
	}
	// Another key, a changed payload or MAC, or no MAC: refused.
	other := &handler{cfg: Config{SessionKey: []byte(strings.Repeat("x", 32))}}
	r := u.Query().Get(paramResult)
	payload, mac, _ := strings.Cut(r, ".")
	for name, bad := range map[string]struct {
		h *handler
		s string
	}{
		"other key":  {other, r},
		"payload":    {h, "e30." + mac},
		"mac":        {h, payload + "." + strings.Repeat("A", len(mac))},
		"no mac":     {h, payload},
		"not base64": {h, "!!!." + mac},
		"empty":      {h, ""},
	} {
		if _, err := bad.h.readResult(bad.s); !errors.Is(err, errBadResult) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
