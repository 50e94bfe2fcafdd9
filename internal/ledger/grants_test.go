package ledger_test

import (
	"errors"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

func TestGrantSet(t *testing.T) {
	s := ledger.NewGrantSet()
	if id := ledger.GrantID("ns", "g", 2); id != "ns/g#2" {
		t.Fatalf("GrantID = %q", id)
	}
	err := s.Set(
		ledger.Grant{ID: "ns/ok#0", Consumer: project("p"), ResourceType: rtProjects, Amount: 1},
		ledger.Grant{ID: "", Consumer: project("p"), ResourceType: rtProjects, Amount: -1},
		ledger.Grant{ID: "ns/x#0", Consumer: ledger.Consumer{}, ResourceType: ""},
	)
	want := "grants[1].id: must not be empty; grants[1].amount: must not be negative, got -1; grants[2].resourceType: must not be empty; grants[2].consumer.kind: must not be empty; grants[2].consumer.name: must not be empty"
	if !errors.Is(err, ledger.ErrInvalid) || err.Error() != want {
		t.Fatalf("Set err = %v, want %q", err, want)
	}
	if got := s.GrantsFor(project("p"), rtProjects); len(got) != 0 {
		t.Fatalf("invalid Set stored %+v", got)
	}

	for _, id := range []string{"ns/c#0", "ns/a#0", "ns/b#1", "ns/b#0"} {
		if err := s.Set(ledger.Grant{ID: id, Consumer: project("p"), ResourceType: rtProjects, Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Set(ledger.Grant{ID: "ns/other#0", Consumer: project("q"), ResourceType: rtProjects, Amount: 1})
	// Re-setting an ID may move it to another consumer.
	_ = s.Set(ledger.Grant{ID: "ns/c#0", Consumer: project("q"), ResourceType: rtProjects, Amount: 1})
	ids := func(gs []ledger.Grant) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	if got := ids(s.GrantsFor(project("p"), rtProjects)); len(got) != 3 || got[0] != "ns/a#0" || got[1] != "ns/b#0" || got[2] != "ns/b#1" {
		t.Fatalf("GrantsFor(p) = %v", got)
	}
	s.Delete("ns/b#0", "ns/unknown#0")
	if got := ids(s.GrantsFor(project("p"), rtProjects)); len(got) != 2 || got[0] != "ns/a#0" || got[1] != "ns/b#1" {
		t.Fatalf("GrantsFor(p) after delete = %v", got)
	}
	if got := ids(s.GrantsFor(project("q"), rtProjects)); len(got) != 2 {
		t.Fatalf("GrantsFor(q) = %v", got)
	}
	if got := s.GrantsFor(project("p"), rtInstances); len(got) != 0 {
		t.Fatalf("GrantsFor(other resource type) = %v", got)
	}
}
