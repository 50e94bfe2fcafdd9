package grants

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/test/builders"
)

var acme = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}

const (
	rtProjects = "resourcemanager.miloapis.com/projects"
	rtCPU      = "compute.miloapis.com/cpu"
)

func grantObj(name string, generation int64, active *bool, allowances ...quotav1alpha1.Allowance) *quotav1alpha1.ResourceGrant {
	g := builders.Grant(name, "quotakeeper-system").Generation(generation).
		Consumer(quotav1alpha1.ConsumerRef{APIGroup: acme.APIGroup, Kind: acme.Kind, Name: acme.Name}).Allowances(allowances...)
	if active != nil {
		status := metav1.ConditionFalse
		if *active {
			status = metav1.ConditionTrue
		}
		g.Condition(quotav1alpha1.ConditionActive, status, "Test")
	}
	return g.Obj()
}

// amounts summarizes GrantsFor as "id=amount,..." for exact comparison.
func amounts(m *Mirror, c ledger.Consumer, rt string) string {
	var out []string
	for _, g := range m.GrantsFor(c, rt) {
		out = append(out, g.ID+"="+strconv.FormatInt(g.Amount, 10))
	}
	return strings.Join(out, ",")
}

func TestActiveNeedsTheCurrentGeneration(t *testing.T) {
	for _, tc := range []struct {
		name              string
		g                 *quotav1alpha1.ResourceGrant
		evaluated, active bool
	}{
		{"no condition", grantObj("g", 1, nil), false, false},
		{"active", grantObj("g", 1, ptr.To(true)), true, true},
		{"inactive", grantObj("g", 1, ptr.To(false)), true, false},
		{"active for an older generation", func() *quotav1alpha1.ResourceGrant {
			g := grantObj("g", 2, ptr.To(true))
			g.Status.Conditions[0].ObservedGeneration = 1
			return g
		}(), false, false},
	} {
		if Evaluated(tc.g) != tc.evaluated || Active(tc.g) != tc.active {
			t.Errorf("%s: Evaluated %v Active %v, want %v %v", tc.name, Evaluated(tc.g), Active(tc.g), tc.evaluated, tc.active)
		}
	}
}

// A grant the shared conversion refuses counts nothing, even if marked
// Active (fail closed).
func TestUnconvertibleActiveGrantCountsNothing(t *testing.T) {
	m := NewMirror()
	m.observe(grantObj("g", 1, ptr.To(true), builders.Allowance(rtProjects, 3)))
	bad := grantObj("g", 2, ptr.To(true), quotav1alpha1.Allowance{ResourceType: rtProjects, Buckets: []quotav1alpha1.GrantBucket{{
		Amount: 1, DimensionSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "In"}}},
	}}})
	m.observe(bad)
	if got := amounts(m, acme, rtProjects); got != "" {
		t.Fatalf("unconvertible grant counts %s", got)
	}
}

func TestMirrorCountsOnlyActiveGrants(t *testing.T) {
	m := NewMirror()
	var changes []Change
	cancel := m.Subscribe(func(c Change) { changes = append(changes, c) })
	defer cancel()

	m.observe(grantObj("pending", 1, nil, builders.Allowance(rtProjects, 7)))
	m.observe(grantObj("refused", 1, ptr.To(false), builders.Allowance(rtProjects, 9)))
	if got := amounts(m, acme, rtProjects); got != "" {
		t.Fatalf("unjudged and inactive grants counted: %s", got)
	}
	if len(changes) != 0 {
		t.Fatalf("changes for grants that count nothing: %v", changes)
	}

	m.observe(grantObj("g", 1, ptr.To(true), builders.Allowance(rtProjects, 3), builders.Allowance(rtCPU, 4000)))
	if got := amounts(m, acme, rtProjects); got != "quotakeeper-system/g#0=3" {
		t.Fatalf("projects = %s", got)
	}
	if got := amounts(m, acme, rtCPU); got != "quotakeeper-system/g#1=4000" {
		t.Fatalf("cpu = %s", got)
	}
	want := []Change{{acme, rtCPU}, {acme, rtProjects}}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}

	// A status-only update (same generation and amounts) changes nothing.
	changes = nil
	m.observe(grantObj("g", 1, ptr.To(true), builders.Allowance(rtProjects, 3), builders.Allowance(rtCPU, 4000)))
	if len(changes) != 0 {
		t.Fatalf("a no-op update notified %v", changes)
	}

	// An edit not judged yet keeps the amounts last seen active.
	m.observe(grantObj("g", 2, nil, builders.Allowance(rtProjects, 1)))
	g2 := grantObj("g", 2, ptr.To(true), builders.Allowance(rtProjects, 1))
	g2.Status.Conditions[0].ObservedGeneration = 1
	m.observe(g2)
	if got := amounts(m, acme, rtCPU); got != "quotakeeper-system/g#1=4000" {
		t.Fatalf("unjudged edit changed cpu to %q", got)
	}

	// Judged active: the shrunk grant replaces the old one, dropping cpu.
	m.observe(grantObj("g", 2, ptr.To(true), builders.Allowance(rtProjects, 1)))
	if got := amounts(m, acme, rtProjects) + ";" + amounts(m, acme, rtCPU); got != "quotakeeper-system/g#0=1;" {
		t.Fatalf("after shrink: %s", got)
	}
	want = []Change{{acme, rtCPU}, {acme, rtProjects}}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}

	// Judged inactive: dropped at once.
	m.observe(grantObj("g", 3, ptr.To(false), builders.Allowance(rtProjects, 1)))
	if got := amounts(m, acme, rtProjects); got != "" {
		t.Fatalf("inactive grant still counts: %s", got)
	}

	// Deleted, including through a tombstone.
	m.observe(grantObj("h", 1, ptr.To(true), builders.Allowance(rtProjects, 2)))
	m.forget(toolscache.DeletedFinalStateUnknown{Key: "quotakeeper-system/h", Obj: grantObj("h", 1, ptr.To(true))})
	if got := amounts(m, acme, rtProjects); got != "" {
		t.Fatalf("deleted grant still counts: %s", got)
	}
	if len(m.Changes()) != 0 {
		t.Fatalf("mirror still holds pairs: %v", m.Changes())
	}
}

func TestSubscribeStartsFromCurrentPairs(t *testing.T) {
	m := NewMirror()
	m.observe(grantObj("g", 1, ptr.To(true), builders.Allowance(rtProjects, 3)))
	var got []Change
	cancel := m.Subscribe(func(c Change) { got = append(got, c) })
	if diff := cmp.Diff([]Change{{acme, rtProjects}}, got); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	cancel()
	m.observe(grantObj("g", 2, ptr.To(true), builders.Allowance(rtProjects, 4)))
	if len(got) != 1 {
		t.Fatalf("cancelled subscriber still notified: %v", got)
	}
}

func TestNotSyncedBeforeRegister(t *testing.T) {
	if NewMirror().HasSynced() {
		t.Fatal("a mirror with no informer reports synced")
	}
}
