package ledger_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// The reference model: plain maps, no locking, no copying, no cleverness. It
// restates the ledger's documented semantics directly so the two can be
// driven side by side.

type refRes struct {
	amount  int64
	expires time.Time
	object  ledger.ObjectRef
	count   int64 // for a sum: how many creates it holds
}

type refBucket struct {
	limit  int64
	grants []ledger.GrantContribution
	alloc  int64
	byNs   map[string]int64
	count  int64
	res    map[string]refRes
}

type refModel struct {
	now     time.Time
	ttl     time.Duration
	compact int // CompactAbove; negative: never
	grants  map[string]ledger.Grant
	buckets map[ledger.BucketKey]*refBucket
	dims    map[ledger.BucketKey]map[string]string // dimensions each key was built from
	stats   map[string]int                         // which paths the run exercised
}

func newRefModel() *refModel {
	return &refModel{
		now: t0, ttl: ledger.DefaultReservationTTL, compact: ledger.DefaultCompactAbove,
		grants:  map[string]ledger.Grant{},
		buckets: map[ledger.BucketKey]*refBucket{},
		dims:    map[ledger.BucketKey]map[string]string{},
		stats:   map[string]int{},
	}
}

func (m *refModel) limit(key ledger.BucketKey) (int64, []ledger.GrantContribution) {
	ids := slices.Sorted(maps.Keys(m.grants))
	var sum int64
	var contribs []ledger.GrantContribution
	for _, id := range ids {
		g := m.grants[id]
		if g.Consumer != key.Consumer || g.ResourceType != key.ResourceType {
			continue
		}
		if g.Selector != nil && !g.Selector.Matches(labels.Set(m.dims[key])) {
			continue
		}
		sum += g.Amount
		contribs = append(contribs, ledger.GrantContribution{GrantID: id, Amount: g.Amount, Generation: g.Generation})
	}
	return sum, contribs
}

// refUsage is b's usage under limit, leaving out the reservations of the
// claims named in without.
func refUsage(b *refBucket, limit int64, without ...string) ledger.Usage {
	u := ledger.Usage{Limit: limit}
	if b != nil {
		u.Allocated = b.alloc
		for id, r := range b.res {
			if !slices.Contains(without, id) {
				u.Reserved += r.amount
			}
		}
	}
	if free := limit - u.Allocated - u.Reserved; free > 0 {
		u.Available = free
	}
	return u
}

// recorded reports whether some write recorded a limit on b (a grant
// contributed, or the limit is above zero), as the ledger's limitRecorded.
func (b *refBucket) recorded() bool { return b.grants != nil || b.limit != 0 }

// write returns the bucket, creating it, with the current limit recorded
// if it records none yet: what a reserving or releasing write does. Only
// refresh and observe (record) rewrite a recorded limit.
func (m *refModel) write(key ledger.BucketKey) *refBucket {
	b := m.buckets[key]
	if b == nil {
		b = &refBucket{res: map[string]refRes{}}
		m.buckets[key] = b
	}
	if !b.recorded() {
		b.limit, b.grants = m.limit(key)
	}
	return b
}

// record is write with the current limit recorded whatever the bucket
// held: the leader's Refresh and Observe.
func (m *refModel) record(key ledger.BucketKey) *refBucket {
	b := m.write(key)
	b.limit, b.grants = m.limit(key)
	return b
}

// decidingLimit is the limit a reserving write decides against: the lower
// of the current grants' and the one the bucket records, if it records one.
func (m *refModel) decidingLimit(key ledger.BucketKey) int64 {
	limit, _ := m.limit(key)
	if b := m.buckets[key]; b != nil && b.recorded() {
		return min(limit, b.limit)
	}
	return limit
}

func (m *refModel) holds(key ledger.BucketKey, id string) bool {
	b := m.buckets[key]
	if b == nil {
		return false
	}
	_, r := b.res[id]
	return r
}

func refValid(c ledger.Claim) bool {
	if c.ID == "" || len(c.Requests) == 0 {
		return false
	}
	for _, r := range c.Requests {
		if r.Amount <= 0 || r.ResourceType == "" || r.Consumer.Kind == "" || r.Consumer.Name == "" {
			return false
		}
	}
	return true
}

type refTarget struct {
	key ledger.BucketKey
	req ledger.Request
}

func (m *refModel) merge(c ledger.Claim) []refTarget {
	var ts []refTarget
	for _, r := range c.Requests {
		key := ledger.NewBucketKey(r.Consumer, r.ResourceType, r.Dimensions)
		m.dims[key] = r.Dimensions
		found := false
		for i := range ts {
			if ts[i].key == key {
				ts[i].req.Amount += r.Amount
				found = true
			}
		}
		if !found {
			r.Dimensions = maps.Clone(r.Dimensions)
			ts = append(ts, refTarget{key, r})
		}
	}
	return ts
}

func (m *refModel) reserve(c ledger.Claim) ledger.Decision {
	ts := m.merge(c)
	type state struct {
		limit      int64
		before     ledger.Usage
		held, fits bool
		take       int64 // what the take adds: the amount, or what a held one lacks
	}
	st := make([]state, len(ts))
	all := true
	for i, t := range ts {
		limit := m.decidingLimit(t.key)
		u := refUsage(m.buckets[t.key], limit)
		held := m.holds(t.key, c.ID)
		take := t.req.Amount
		if held {
			take = max(0, take-m.buckets[t.key].res[c.ID].amount)
			if take > 0 {
				// A growth is judged, and reported, without the claim's
				// own smaller reservation.
				m.stats["held-grown"]++
				u = refUsage(m.buckets[t.key], limit, c.ID)
				take = t.req.Amount
			}
		}
		fits := take == 0 || u.Allocated+u.Reserved+take <= limit
		st[i] = state{limit, u, held, fits, take}
		all = all && fits
		if held {
			m.stats["held"]++
		}
	}
	if len(ts) < len(c.Requests) {
		m.stats["merged"]++
	}
	d := ledger.Decision{Granted: all}
	if all {
		for i, t := range ts {
			if st[i].take > 0 {
				b := m.write(t.key)
				b.res[c.ID] = refRes{amount: t.req.Amount, expires: m.now.Add(m.ttl), object: c.Object}
				m.compactBucket(b, c.ID)
			}
		}
	} else {
		// Buckets are taken in name order; those taken before the first refusal
		// were written (and rolled back), so they exist with a fresh limit.
		order := make([]int, len(ts))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return ts[order[a]].key.Name() < ts[order[b]].key.Name() })
		for _, i := range order {
			if !st[i].fits {
				break
			}
			if st[i].take > 0 {
				// Taken (compacting what it may) and rolled back: the
				// claim's reservation goes, a compaction it made stays.
				b := m.write(ts[i].key)
				old, had := b.res[c.ID]
				b.res[c.ID] = refRes{amount: ts[i].req.Amount, expires: m.now.Add(m.ttl), object: c.Object}
				m.compactBucket(b, c.ID)
				delete(b.res, c.ID)
				if had {
					b.res[c.ID] = old
				}
				m.stats["rolled-back"]++
			}
		}
	}
	for i, t := range ts {
		u := st[i].before
		if all {
			u = refUsage(m.buckets[t.key], st[i].limit)
		}
		rd := ledger.RequestDecision{
			Request: t.req, Bucket: t.key.Name(), Granted: all, Reason: "QuotaExceeded",
			Limit: u.Limit, Allocated: u.Allocated, Reserved: u.Reserved, Available: u.Available,
		}
		if st[i].fits {
			rd.Reason = "QuotaAvailable"
		}
		if all {
			rd.Message = fmt.Sprintf("granted %d of %s: available %d of %d (allocated %d, reserved %d)", t.req.Amount, t.req.ResourceType, u.Available, u.Limit, u.Allocated, u.Reserved)
		} else {
			rd.Message = fmt.Sprintf("requested %d of %s, available %d of %d (allocated %d, reserved %d)", t.req.Amount, t.req.ResourceType, u.Available, u.Limit, u.Allocated, u.Reserved)
		}
		d.Requests = append(d.Requests, rd)
	}
	return d
}

// compactBucket restates the reserving write's compaction: past compact
// admission creates (a bare id, a group other than quota.miloapis.com),
// the oldest but keep's go into one new sum, down to compact/2; past
// MaxSums sums, all merge into one new sum. A new sum's number is above
// every sum's in the bucket and not below the clock in microseconds.
func (m *refModel) compactBucket(b *refBucket, keep string) {
	above := m.compact
	if above < 0 {
		return
	}
	creates := func(id string, r refRes) bool {
		return !strings.Contains(id, "/") && r.object.APIGroup != "quota.miloapis.com"
	}
	n := 0
	var oldest []string
	for id, r := range b.res {
		if creates(id, r) {
			n++
			if id != keep {
				oldest = append(oldest, id)
			}
		}
	}
	if n <= above {
		return
	}
	sort.Slice(oldest, func(i, j int) bool {
		a, c := b.res[oldest[i]], b.res[oldest[j]]
		if !a.expires.Equal(c.expires) {
			return a.expires.Before(c.expires)
		}
		return oldest[i] < oldest[j]
	})
	m.sum(b, oldest[:min(len(oldest), n-above/2)])
	m.stats["compacted"]++
	var sums []string
	for id := range b.res {
		if ledger.IsSum(id) {
			sums = append(sums, id)
		}
	}
	if len(sums) > ledger.MaxSums {
		m.sum(b, sums)
		m.stats["sums-merged"]++
	}
}

func (m *refModel) sum(b *refBucket, ids []string) {
	next := m.now.UnixMicro()
	for id := range b.res {
		if n, err := strconv.ParseInt(strings.TrimPrefix(id, ledger.SumPrefix), 10, 64); ledger.IsSum(id) && err == nil && n >= next {
			next = n + 1
		}
	}
	s := refRes{expires: m.now}
	for _, id := range ids {
		r := b.res[id]
		s.amount += r.amount
		s.count += max(1, r.count)
		delete(b.res, id)
	}
	s.object = ledger.SumObject(s.count)
	b.res[ledger.SumPrefix+strconv.FormatInt(next, 10)] = s
}

// observe writes the observed figures and drops the named reservations, and
// writes (creating the bucket) only if that changes anything.
func (m *refModel) observe(key ledger.BucketKey, obs ledger.Observation) {
	limit, contribs := m.limit(key)
	var removed []string
	for _, id := range append(slices.Clone(obs.Fold), obs.Expire...) {
		if m.holds(key, id) {
			removed = append(removed, id)
		}
	}
	old := m.buckets[key]
	if old == nil {
		old = &refBucket{}
	}
	if len(removed) == 0 && old.limit == limit && slices.Equal(old.grants, contribs) &&
		old.alloc == obs.Allocated && old.count == obs.Count && maps.Equal(old.byNs, obs.ByNamespace) {
		m.stats["observe-unchanged"]++
		return
	}
	b := m.record(key)
	b.alloc, b.count, b.byNs = obs.Allocated, obs.Count, maps.Clone(obs.ByNamespace)
	for _, id := range removed {
		delete(b.res, id)
		m.stats["folded-or-expired"]++
		if ledger.IsSum(id) {
			m.stats["sum-freed"]++
		}
	}
}

func (m *refModel) release(c ledger.Claim) {
	for _, t := range m.merge(c) {
		if m.holds(t.key, c.ID) {
			delete(m.write(t.key).res, c.ID)
		}
	}
}

func (m *refModel) refresh(key ledger.BucketKey) {
	limit, contribs := m.limit(key)
	b := m.buckets[key]
	if b == nil {
		if limit != 0 || len(contribs) != 0 {
			m.record(key)
		}
		return
	}
	b.limit, b.grants = limit, contribs
}

func (m *refModel) usage(key ledger.BucketKey) ledger.Usage {
	if b := m.buckets[key]; b != nil {
		return refUsage(b, b.limit)
	}
	limit, _ := m.limit(key)
	return refUsage(nil, limit)
}

// modelGen produces random operations over a small universe, so that buckets
// fill up, grants overlap and claim ids collide often.
type modelGen struct {
	r         *rand.Rand
	claims    map[string]ledger.Claim
	consumers []ledger.Consumer
	rts       []string
	dims      []map[string]string
	selectors []labels.Selector
	grantIDs  []string
	keys      []ledger.BucketKey
	gen       int64
	// away makes the observer name a reservation 1 time in 16 rather
	// than 1 in 2, as one that is mostly away, and grants larger: buckets
	// fill up, compact and merge their sums.
	away bool
}

func newModelGen(t *testing.T, seed int64, m *refModel) *modelGen {
	g := &modelGen{
		r:         rand.New(rand.NewSource(seed)),
		claims:    map[string]ledger.Claim{},
		consumers: []ledger.Consumer{project("p0"), project("p1"), project("p2"), org("o0")},
		rts:       []string{rtProjects, rtInstances},
		dims:      []map[string]string{nil, {"location": "DFW"}, {"location": "LHR"}, {"location": "SIN"}},
		selectors: []labels.Selector{
			nil, labels.Everything(),
			mustSelector(t, "location in (DFW,LHR)"), mustSelector(t, "location=DFW"),
			mustSelector(t, "location"), mustSelector(t, "!location"), mustSelector(t, "location notin (SIN)"),
		},
	}
	for i := range 8 {
		g.grantIDs = append(g.grantIDs, ledger.GrantID("quota", fmt.Sprintf("g%d", i/2), i%2))
	}
	for _, c := range g.consumers {
		for _, rt := range g.rts {
			for _, d := range g.dims {
				key := ledger.NewBucketKey(c, rt, d)
				m.dims[key] = d
				g.keys = append(g.keys, key)
			}
		}
	}
	return g
}

func (g *modelGen) claim() ledger.Claim {
	id := fmt.Sprintf("claim-%d", g.r.Intn(24))
	if c, ok := g.claims[id]; ok && g.r.Intn(10) != 0 {
		if g.r.Intn(4) == 0 {
			// Another constraint counting the same object into the same
			// buckets, for more: the reservation grows.
			c.Requests = slices.Clone(c.Requests)
			for i := range c.Requests {
				c.Requests[i].Amount++
			}
		}
		return c // a replay
	}
	rt := g.rts[g.r.Intn(len(g.rts))]
	dims := g.dims[g.r.Intn(len(g.dims))]
	p := g.consumers[g.r.Intn(3)]
	reqs := []ledger.Request{req(p, rt, 1+g.r.Int63n(3), dims)}
	if g.r.Intn(2) == 0 { // project cap + organization cap
		reqs = append(reqs, req(org("o0"), rt, reqs[0].Amount, dims))
	}
	if g.r.Intn(8) == 0 { // same bucket twice: merged
		reqs = append(reqs, req(p, rt, 1+g.r.Int63n(2), dims))
	}
	if g.r.Intn(5) == 0 {
		other := g.rts[(slices.Index(g.rts, rt)+1)%len(g.rts)]
		reqs = append(reqs, req(p, other, 1+g.r.Int63n(2), g.dims[g.r.Intn(len(g.dims))]))
	}
	g.r.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	c := claim(id, reqs...)
	g.claims[id] = c
	return c
}

func (g *modelGen) invalidClaim() ledger.Claim {
	c := claim("bad", req(project("p0"), rtProjects, 1, nil))
	switch g.r.Intn(7) {
	case 0:
		c.ID = ""
	case 1:
		c.Requests = nil
	case 2:
		c.Requests[0].Amount = 0
	case 3:
		c.Requests[0].Amount = -1 - g.r.Int63n(5)
	case 4:
		c.Requests[0].ResourceType = ""
	case 5:
		c.Requests[0].Consumer.Kind = ""
	case 6:
		c.Requests[0].Consumer.Name = ""
	}
	return c
}

// observation makes up what an observer might report for a bucket: a random
// split over a few namespaces (sometimes the bucket's current figures again),
// folding or expiring some of its reservations and naming some ids it does
// not hold.
func (g *modelGen) observation(m *refModel, key ledger.BucketKey) ledger.Observation {
	var obs ledger.Observation
	b := m.buckets[key]
	if b != nil && g.r.Intn(4) == 0 {
		obs = ledger.Observation{Allocated: b.alloc, ByNamespace: maps.Clone(b.byNs), Count: b.count}
	} else {
		for _, ns := range []string{"", "team-a", "team-b"} {
			if g.r.Intn(2) == 0 {
				continue
			}
			v := g.r.Int63n(7)
			if obs.ByNamespace == nil {
				obs.ByNamespace = map[string]int64{}
			}
			obs.ByNamespace[ns] = v
			obs.Allocated += v
			obs.Count += 1 + g.r.Int63n(2)
		}
	}
	if b != nil {
		for _, id := range slices.Sorted(maps.Keys(b.res)) {
			n := 4
			if g.away {
				n = 32
			}
			switch g.r.Intn(n) {
			case 0:
				obs.Fold = append(obs.Fold, id)
			case 1:
				obs.Expire = append(obs.Expire, id)
			}
		}
	}
	if g.r.Intn(3) == 0 {
		obs.Fold = append(obs.Fold, fmt.Sprintf("claim-%d", g.r.Intn(24)))
	}
	return obs
}

func (g *modelGen) invalidObservation() (ledger.Observation, string) {
	obs := ledger.Observation{Allocated: 3, ByNamespace: map[string]int64{"team-a": 1, "team-b": 2}, Count: 2}
	switch g.r.Intn(4) {
	case 0:
		obs.Allocated = -1
		return obs, "allocated: must not be negative, got -1"
	case 1:
		obs.Count = -2
		return obs, "count: must not be negative, got -2"
	case 2:
		obs.ByNamespace["team-b"] = -2
		return obs, "byNamespace[team-b]: must not be negative, got -2"
	default:
		obs.Allocated = 4
		return obs, "byNamespace: sums to 3, want allocated 4"
	}
}

func (g *modelGen) grant() ledger.Grant {
	g.gen++
	most := int64(13)
	if g.away {
		most = 40 // room for the reservations an absent observer leaves
	}
	return ledger.Grant{
		ID:           g.grantIDs[g.r.Intn(len(g.grantIDs))],
		Generation:   g.gen,
		Consumer:     g.consumers[g.r.Intn(len(g.consumers))],
		ResourceType: g.rts[g.r.Intn(len(g.rts))],
		Amount:       g.r.Int63n(most),
		Selector:     g.selectors[g.r.Intn(len(g.selectors))],
	}
}

// The defaults keep `go test -race` around 15 s on two cores; raise them for a
// soak, e.g. go test ./ledger/ -run TestModel -model.seeds 200 -model.steps 20000.
var (
	modelSeeds = flag.Int("model.seeds", 6, "TestModel: number of seeds (1..n)")
	modelSteps = flag.Int("model.steps", 2500, "TestModel: operations per seed")
)

// Odd seeds compact above a few creates per bucket (sums.go); even seeds
// keep the default, which the generator's few claim ids never reach.
// Merging sums is rare in one run; across the seeds it must happen.
func TestModel(t *testing.T) {
	merges := 0
	for seed := int64(1); seed <= int64(*modelSeeds); seed++ {
		compact := 0
		if seed%2 == 1 {
			compact = 1 + int(seed/2)%2
		}
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { merges += runModel(t, seed, *modelSteps, compact)["sums-merged"] })
	}
	if merges == 0 && *modelSeeds > 1 && *modelSteps >= 1000 {
		t.Fatal("no run merged sums")
	}
}

// conflictStore runs every mutate twice, first on a throwaway copy, as a
// compare-and-swap store does after losing a write race, and checks the
// Store contract from the ledger's side: mutate is a pure function of its
// bucket (both runs agree, and closure state from the lost run must not leak
// into the decision) and a failing mutate leaves its bucket untouched.
type conflictStore struct {
	ledger.Store
	t *testing.T
}

func (s conflictStore) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	return s.Store.Apply(ctx, key, func(b *ledger.Bucket) error {
		given := b.DeepCopy()
		lost := b.DeepCopy()
		errLost := mutate(&lost)
		if errLost != nil && !cmp.Equal(lost, given) {
			s.t.Errorf("failing mutate (%v) changed bucket %s (-given +after):\n%s", errLost, key, cmp.Diff(given, lost))
		}
		err := mutate(b)
		if fmt.Sprint(err) != fmt.Sprint(errLost) || (err == nil && !cmp.Equal(*b, lost)) {
			s.t.Errorf("mutate of %s not pure: %v then %v", key, errLost, err)
		}
		if err != nil && !cmp.Equal(*b, given) {
			s.t.Errorf("failing mutate (%v) changed bucket %s", err, key)
		}
		return err
	})
}

func runModel(t *testing.T, seed int64, steps, compact int) (stats map[string]int) {
	f := newFixture(t)
	f.ledger = ledger.New(conflictStore{f.store, t}, f.grants, ledger.WithClock(f.clock.Now), ledger.WithCompactAbove(compact))
	m := newRefModel()
	if compact != 0 {
		m.compact = compact
	}
	g := newModelGen(t, seed, m)
	g.away = compact > 0
	f.clock.now = m.now
	counts := map[string]int{}
	for step := range steps {
		var op string
		switch p := g.r.Intn(100); {
		case p < 35:
			op = "reserve"
			c := g.claim()
			got, err := f.ledger.Reserve(f.ctx, c)
			if err != nil {
				t.Fatalf("step %d reserve %+v: %v", step, c, err)
			}
			want := m.reserve(c)
			if got.Granted {
				counts["granted"]++
			}
			compareDecision(t, step, op, c, got, want)
		case p < 58:
			op = "observe"
			key := g.keys[g.r.Intn(len(g.keys))]
			obs := g.observation(m, key)
			got, err := f.ledger.Observe(f.ctx, key, obs)
			if err != nil {
				t.Fatalf("step %d observe %s %+v: %v", step, key, obs, err)
			}
			m.observe(key, obs)
			compareReturned(t, step, op, key, got, m)
		case p < 68:
			op = "release"
			c := g.claim()
			if err := f.ledger.Release(f.ctx, c); err != nil {
				t.Fatalf("step %d release: %v", step, err)
			}
			m.release(c)
		case p < 76:
			op = "tick" // reservations made from now on expire later
			m.now = m.now.Add([]time.Duration{0, time.Second, 30 * time.Second, 61 * time.Second}[g.r.Intn(4)])
			f.clock.now = m.now
		case p < 86:
			op = "grant-set"
			gr := g.grant()
			if old, ok := m.grants[gr.ID]; ok && g.r.Intn(2) == 0 { // shrink an existing grant
				gr = old
				gr.Amount = g.r.Int63n(old.Amount + 1)
			}
			if err := f.grants.Set(gr); err != nil {
				t.Fatalf("step %d grant set: %v", step, err)
			}
			m.grants[gr.ID] = gr
		case p < 90:
			op = "grant-delete"
			id := g.grantIDs[g.r.Intn(len(g.grantIDs))]
			f.grants.Delete(id)
			delete(m.grants, id)
		case p < 95:
			op = "refresh"
			key := g.keys[g.r.Intn(len(g.keys))]
			b, err := f.ledger.Refresh(f.ctx, key)
			if err != nil {
				t.Fatalf("step %d refresh: %v", step, err)
			}
			m.refresh(key)
			wantLimit, wantGrants := m.limit(key)
			if b.Key != key || b.Limit != wantLimit || !slices.Equal(b.Grants, wantGrants) {
				t.Fatalf("step %d refresh %s returned limit %d grants %v, want %d %v", step, key, b.Limit, b.Grants, wantLimit, wantGrants)
			}
		case p < 98:
			op = "invalid"
			if g.r.Intn(3) == 0 {
				obs, want := g.invalidObservation()
				_, err := f.ledger.Observe(f.ctx, g.keys[g.r.Intn(len(g.keys))], obs)
				if !errors.Is(err, ledger.ErrInvalid) || err.Error() != want {
					t.Fatalf("step %d invalid observation %+v: err = %v, want ErrInvalid %q", step, obs, err, want)
				}
				break
			}
			c := g.invalidClaim()
			var err error
			if g.r.Intn(2) == 0 {
				_, err = f.ledger.Reserve(f.ctx, c)
			} else {
				err = f.ledger.Release(f.ctx, c)
			}
			if refValid(c) || !errors.Is(err, ledger.ErrInvalid) {
				t.Fatalf("step %d invalid claim %+v: err = %v, want ErrInvalid", step, c, err)
			}
		default:
			op = "usage"
			key := g.keys[g.r.Intn(len(g.keys))]
			if got, want := f.usage(t, key), m.usage(key); got != want {
				t.Fatalf("step %d usage of %s = %+v, want %+v", step, key, got, want)
			}
		}
		counts[op]++
		compareState(t, step, op, f, m)
	}
	// A run that never granted or refused anything proves little.
	if counts["granted"] == 0 || counts["granted"] == counts["reserve"] ||
		m.stats["held"] == 0 || m.stats["held-grown"] == 0 || m.stats["merged"] == 0 || m.stats["rolled-back"] == 0 ||
		m.stats["folded-or-expired"] == 0 || m.stats["observe-unchanged"] == 0 ||
		(compact > 0 && (m.stats["compacted"] == 0 || m.stats["sum-freed"] == 0)) {
		t.Fatalf("degenerate run: %v %v", counts, m.stats)
	}
	t.Logf("ops: %v, paths: %v, buckets: %d", counts, m.stats, len(m.buckets))
	return m.stats
}

func compareDecision(t *testing.T, step int, op string, c ledger.Claim, got, want ledger.Decision) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("step %d %s %+v (-want +got):\n%s", step, op, c, diff)
	}
}

// compareReturned checks the bucket a write returned: the bucket as the model
// has it, or an empty one when the write created nothing.
func compareReturned(t *testing.T, step int, op string, key ledger.BucketKey, got ledger.Bucket, m *refModel) {
	t.Helper()
	rb := m.buckets[key]
	if rb == nil {
		if diff := cmp.Diff(ledger.Bucket{Key: key}, got); diff != "" {
			t.Fatalf("step %d %s %s returned a bucket the model does not have (-want +got):\n%s", step, op, key, diff)
		}
		return
	}
	if got.Key != key || got.Limit != rb.limit || !slices.Equal(got.Grants, rb.grants) || got.Allocated != rb.alloc ||
		got.Count != rb.count || !maps.Equal(got.ByNamespace, rb.byNs) || len(got.Reservations) != len(rb.res) {
		t.Fatalf("step %d %s %s returned %+v, model %+v", step, op, key, got, rb)
	}
}

func compareState(t *testing.T, step int, op string, f *fixture, m *refModel) {
	t.Helper()
	list, err := f.store.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(m.buckets) {
		t.Fatalf("step %d after %s: %d buckets, model has %d", step, op, len(list), len(m.buckets))
	}
	for _, b := range list {
		rb := m.buckets[b.Key]
		if rb == nil {
			t.Fatalf("step %d after %s: bucket %s not in model", step, op, b.Key)
		}
		if b.Limit != rb.limit || !slices.Equal(b.Grants, rb.grants) {
			t.Fatalf("step %d after %s: bucket %s limit %d grants %v, model %d %v", step, op, b.Key, b.Limit, b.Grants, rb.limit, rb.grants)
		}
		if b.Allocated != rb.alloc || b.Count != rb.count || !maps.Equal(b.ByNamespace, rb.byNs) {
			t.Fatalf("step %d after %s: bucket %s observed %d %v count %d, model %d %v count %d",
				step, op, b.Key, b.Allocated, b.ByNamespace, b.Count, rb.alloc, rb.byNs, rb.count)
		}
		if len(b.Reservations) != len(rb.res) {
			t.Fatalf("step %d after %s: bucket %s reservations %v, model %v", step, op, b.Key, b.Reservations, rb.res)
		}
		for id, r := range b.Reservations {
			want, ok := rb.res[id]
			if !ok || r.ClaimID != id || r.Amount != want.amount || !r.ExpiresAt.Equal(want.expires) || r.Object != want.object {
				t.Fatalf("step %d after %s: bucket %s reservation %s = %+v, model %+v", step, op, b.Key, id, r, want)
			}
		}
		got, err := b.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if want := refUsage(rb, rb.limit); got != want {
			t.Fatalf("step %d after %s: bucket %s usage %+v, model %+v", step, op, b.Key, got, want)
		}
		if step%16 != 0 {
			continue // Ledger.Usage is a thin read; sampling it keeps the -race run short
		}
		if lu := f.usage(t, b.Key); lu != got {
			t.Fatalf("step %d after %s: Ledger.Usage(%s) = %+v, bucket says %+v", step, op, b.Key, lu, got)
		}
	}
}
