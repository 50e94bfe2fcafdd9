package ledger

import (
	"math/rand"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNewBucketKeyCanonical(t *testing.T) {
	c := Consumer{APIGroup: "g", Kind: "Project", Name: "p"}
	a := NewBucketKey(c, "rt", map[string]string{"zone": "a", "location": "DFW"})
	b := NewBucketKey(c, "rt", map[string]string{"location": "DFW", "zone": "a"})
	if a != b || a.Dimensions != "location=DFW,zone=a" {
		t.Fatalf("keys %+v %+v", a, b)
	}
	if NewBucketKey(c, "rt", nil) != NewBucketKey(c, "rt", map[string]string{}) {
		t.Fatal("nil and empty dimensions differ")
	}
	if got := a.DimensionSet(); !labels.Equals(got, labels.Set{"location": "DFW", "zone": "a"}) {
		t.Fatalf("DimensionSet() = %v", got)
	}
	if got := NewBucketKey(c, "rt", map[string]string{"k": ""}).DimensionSet(); !labels.Equals(got, labels.Set{"k": ""}) {
		t.Fatalf("DimensionSet() with empty value = %v", got)
	}
	if got := NewBucketKey(c, "rt", nil).DimensionSet(); len(got) != 0 {
		t.Fatalf("DimensionSet() of no dimensions = %v", got)
	}
}

func TestBucketKeyName(t *testing.T) {
	c := Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p"}
	k := NewBucketKey(c, "resourcemanager.miloapis.com/projects", nil)
	name := k.Name()
	if !strings.HasPrefix(name, "resourcemanager-miloapis-com-projects-") || len(name) != len("resourcemanager-miloapis-com-projects-")+32 {
		t.Fatalf("Name() = %q", name)
	}
	if k.Name() != name {
		t.Fatal("Name() not deterministic")
	}

	// Fields that concatenate to the same text must still get distinct names.
	distinct := []BucketKey{
		{Consumer: Consumer{Namespace: "a", Name: "b"}, ResourceType: "rt"},
		{Consumer: Consumer{Namespace: "ab", Name: ""}, ResourceType: "rt"},
		{Consumer: Consumer{Namespace: "", Name: "ab"}, ResourceType: "rt"},
		{Consumer: Consumer{Name: "a"}, ResourceType: "brt"},
		{Consumer: Consumer{Kind: "a", Name: "b"}, ResourceType: "rt"},
		{Consumer: Consumer{APIGroup: "a", Name: "b"}, ResourceType: "rt"},
		{Consumer: Consumer{Name: "ab"}, ResourceType: "rt", Dimensions: "x=y"},
		{Consumer: Consumer{Name: "ab"}, ResourceType: "rtx=y"},
	}
	seen := map[string]BucketKey{}
	for _, k := range distinct {
		if prev, ok := seen[k.Name()]; ok {
			t.Fatalf("%+v and %+v share name %s", prev, k, k.Name())
		}
		seen[k.Name()] = k
	}

	r := rand.New(rand.NewSource(1))
	alphabet := []rune("aZ09-._/ :=,#ü\x00..--")
	randString := func(n int) string {
		out := make([]rune, r.Intn(n))
		for i := range out {
			out[i] = alphabet[r.Intn(len(alphabet))]
		}
		return string(out)
	}
	for range 2000 {
		k := BucketKey{Consumer: Consumer{APIGroup: randString(20), Kind: randString(10), Namespace: randString(70), Name: randString(300)},
			ResourceType: randString(400), Dimensions: randString(50)}
		if errs := validation.IsDNS1123Subdomain(k.Name()); len(errs) > 0 {
			t.Fatalf("Name() of %+v = %q: %v", k, k.Name(), errs)
		}
	}
}

// Stored buckets are found by name: a change to the naming scheme would
// orphan every bucket in a running cluster.
func TestBucketKeyNamesAreStable(t *testing.T) {
	for _, tc := range []struct {
		key  BucketKey
		want string
	}{
		{NewBucketKey(Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p"}, "resourcemanager.miloapis.com/projects", nil),
			"resourcemanager-miloapis-com-projects-9715b782a6bceb6217b1f6fd7f4322dd"},
		{NewBucketKey(Consumer{Kind: "Namespace", Name: "team"}, "compute.miloapis.com/cpu", map[string]string{"region": "dfw", "zone": "a"}),
			"compute-miloapis-com-cpu-8acace1ea113c8c21f0585e4edd30a88"},
		{NewBucketKey(Consumer{Name: "x"}, "..//", nil), "bucket-7f978d2af0bd299cdd4b06bbca28a4f9"},
		{NewBucketKey(Consumer{Name: "x"}, "a-very-long.resource-type.example.com/with-a-name-that-exceeds-the-prefix-limit", nil),
			"a-very-long-resource-type-example-com-with-a-nam-3d49fae6faeec30ca36d7102286a6cc0"},
	} {
		if got := tc.key.Name(); got != tc.want {
			t.Errorf("%v: Name() = %q, want %q", tc.key, got, tc.want)
		}
	}
}
