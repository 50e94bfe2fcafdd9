package ledger

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var sumAt = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// create is an admission create's reservation, expiring at sumAt plus i
// seconds.
func create(id string, amount int64, i int) Reservation {
	return Reservation{ClaimID: id, Object: ObjectRef{Kind: "ConfigMap", Namespace: "ns", Name: id, UID: id}, Amount: amount, ExpiresAt: sumAt.Add(time.Duration(i) * time.Second)}
}

func sumOf(id string, amount, count int64, at time.Time) Reservation {
	return Reservation{ClaimID: id, Object: SumObject(count), Amount: amount, ExpiresAt: at}
}

func sumIDAt(at time.Time, plus int64) string {
	return SumPrefix + strconv.FormatInt(at.UnixMicro()+plus, 10)
}

func TestCompactedLeavesABucketAtTheThresholdAlone(t *testing.T) {
	res := map[string]Reservation{"a": create("a", 1, 0), "b": create("b", 1, 1)}
	got, err := compacted(res, create("c", 1, 2), 3, sumAt)
	if err != nil || got != nil {
		t.Fatalf("3 creates at CompactAbove 3: compacted = %v, %v; want nil", got, err)
	}
	if got, err := compacted(res, create("c", 1, 2), -1, sumAt); err != nil || got != nil {
		t.Fatalf("CompactAbove -1: compacted = %v, %v; want nil", got, err)
	}
}

func TestCompactedReplacesTheOldestCreatesByOneSum(t *testing.T) {
	res := map[string]Reservation{
		"e": create("e", 5, 0), // oldest
		"b": create("b", 2, 1), // same expiry as a: by id
		"a": create("a", 3, 1),
		"d": create("d", 7, 3),
		// Never compacted: a growth, a namespace move, an Allocation
		// claim, a delegated grant's hand-out, one with no expiry.
		"u/2/growth":          create("u/2/growth", 11, -5),
		"namespace-move/n/ff": create("namespace-move/n/ff", 13, -5),
		"claim-uid":           {ClaimID: "claim-uid", Object: ObjectRef{APIGroup: "quota.miloapis.com", Kind: "ResourceClaim", Name: "c", UID: "claim-uid"}, Amount: 17, ExpiresAt: sumAt},
		"grant-uid":           {ClaimID: "grant-uid", Object: ObjectRef{APIGroup: "quota.miloapis.com", Kind: "ResourceGrant", Name: "g", UID: "grant-uid"}, Amount: 19, ExpiresAt: sumAt},
		"no-expiry":           {ClaimID: "no-expiry", Object: ObjectRef{Kind: "ConfigMap", Name: "x", UID: "no-expiry"}, Amount: 23},
	}
	// The added one is the oldest of all by its expiry, and still kept:
	// its own rollback must find it.
	added := create("f", 1, -10)
	got, err := compacted(res, added, 4, sumAt)
	if err != nil {
		t.Fatal(err)
	}
	// 5 compactable > 4: the oldest 5-4/2 = 3 other than f go: e, a, b.
	want := map[string]Reservation{
		"d": res["d"], "f": added,
		"u/2/growth": res["u/2/growth"], "namespace-move/n/ff": res["namespace-move/n/ff"],
		"claim-uid": res["claim-uid"], "grant-uid": res["grant-uid"], "no-expiry": res["no-expiry"],
		sumIDAt(sumAt, 0): sumOf(sumIDAt(sumAt, 0), 10, 3, sumAt),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("compacted (-want +got):\n%s", diff)
	}
	if len(res) != 9 {
		t.Fatalf("compacted changed its input: %v", res)
	}
	before, _ := reservedOf(res)
	after, _ := reservedOf(got)
	if after != before+added.Amount {
		t.Fatalf("reserved %d after compaction, want %d", after, before+added.Amount)
	}
}

func TestCompactedMergesSumsBeyondMaxIntoOneNewSum(t *testing.T) {
	later := sumAt.Add(time.Hour)
	res := map[string]Reservation{"a": create("a", 1, 0), "b": create("b", 2, 1)}
	for i := range MaxSums {
		id := sumIDAt(later, int64(10*i)) // ids above the clock: the next is above them
		res[id] = sumOf(id, int64(100*(i+1)), int64(i+1), later)
	}
	got, err := compacted(res, create("c", 4, 2), 2, sumAt)
	if err != nil {
		t.Fatal(err)
	}
	// 3 > 2: a and b (down to 2/2 = 1) make a fifth sum; the five merge
	// into one whose id is new: above every earlier one, never an existing
	// id.
	id := sumIDAt(later, 10*(MaxSums-1)+2)
	want := map[string]Reservation{
		"c": create("c", 4, 2),
		id:  sumOf(id, 100+200+300+400+1+2, 1+2+3+4+2, sumAt),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("compacted (-want +got):\n%s", diff)
	}
}

func TestCompactionSkipsAnAmountThatOverflows(t *testing.T) {
	res := map[string]Reservation{"a": create("a", math.MaxInt64-1, 0), "b": create("b", 1, 1)}
	id := SumPrefix + "1"
	res[id] = sumOf(id, 1, 1, sumAt)
	// a+b fit; the merge of a+b with the sum would not, nor would reserved
	// with c: the reserved total overflows and nothing compacts.
	if got, err := compacted(res, create("c", 1, 2), 0, sumAt); err != nil || got != nil {
		t.Fatalf("compacted = %v, %v; want nil", got, err)
	}
	delete(res, id)
	// Reserved fits (MaxInt64), and so does the sum of a and b.
	got, err := compacted(res, create("c", 0, 2), 0, sumAt)
	if err != nil {
		t.Fatal(err)
	}
	if s := got[sumIDAt(sumAt, 0)]; s.Amount != math.MaxInt64 || SumCount(s) != 2 {
		t.Fatalf("compacted = %v", got)
	}
}

func TestSumIDNeverRepeatsOneInTheBucketNorGoesBelowTheClock(t *testing.T) {
	if got, want := sumID(nil, sumAt), sumIDAt(sumAt, 0); got != want {
		t.Fatalf("empty bucket: %s, want %s", got, want)
	}
	res := map[string]Reservation{sumIDAt(sumAt, 7): {}, SumPrefix + "3": {}, SumPrefix + "x": {}, "u": {}}
	if got, want := sumID(res, sumAt), sumIDAt(sumAt, 8); got != want {
		t.Fatalf("after sum %s: %s, want %s", sumIDAt(sumAt, 7), got, want)
	}
	// Every sum freed: the clock, not 1, so no freed id comes back.
	if got, want := sumID(map[string]Reservation{}, sumAt.Add(time.Second)), sumIDAt(sumAt, 1e6); got != want {
		t.Fatalf("after the sums were freed: %s, want %s", got, want)
	}
}
