package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// The conformance replay: model/quota.pml, a Promela model of the quota
// protocol for one bucket, prints one "QK ..." line per action of a random
// simulation. ReplayModelTrace drives a real Ledger on a Store through the
// same actions and checks after every write that the bucket is the
// model's, so that what SPIN proves of the model is known to hold of the
// code it describes, on any Store.

// ModelLineKinds are the kinds of line (the word after "QK") a trace
// without leases holds. "cover" is printed only when the model's own COVER
// monitor fails.
var ModelLineKinds = []string{
	"grant", "tick", "reserve", "grow", "compact", "counted", "free", "observe",
	"expire", "expire-growth", "fold-created", "bucket",
	"stored", "never", "updated", "update-refused", "delete", "shrink",
	"restart", "rebuilt", "settled", "cover",
}

// ModelOptions are the model's -D settings that the ledger's side of a
// replay depends on, and where it replays.
type ModelOptions struct {
	// Limit0 is LIMIT0, the grant before the one change (0: the model's
	// default, 3). The change's amount is on the trace's grant line.
	Limit0 int64
	// CompactAbove is COMPACT, given to ledger.WithCompactAbove (0: the
	// model's default, 1).
	CompactAbove int
	// Consumer owns the replay's bucket (zero: one of the replay's own). A
	// store shared by several replays needs one per replay.
	Consumer ledger.Consumer
}

// ModelOptionsFor reads the settings ModelOptions holds from spin's -D
// flags; the rest (NOBJ, MAXT, LIMIT1) only shape the trace.
func ModelOptionsFor(flags []string) (ModelOptions, error) {
	var o ModelOptions
	for _, f := range flags {
		name, value, ok := strings.Cut(strings.TrimPrefix(f, "-D"), "=")
		if !ok || (name != "LIMIT0" && name != "COMPACT") {
			continue
		}
		n, err := strconv.Atoi(value)
		if err != nil {
			return ModelOptions{}, fmt.Errorf("flag %s: %w", f, err)
		}
		if name == "LIMIT0" {
			o.Limit0 = int64(n)
		} else {
			o.CompactAbove = n
		}
	}
	return o, nil
}

// spinFlags are the -D flags of every simulation: no capacity leases,
// whose rounds run on the ledger's own clock and are not driven by a trace.
func spinFlags(flags []string) []string { return append([]string{"-DNOLEASES"}, flags...) }

// simulation are spin's options for one random simulation: its seed,
// printfs only (-T), no final state dump (-B), a depth far past any trace.
func simulation(seed int) []string { return []string{fmt.Sprintf("-n%d", seed), "-T", "-B", "-u5000"} }

// SpinCommand is the shell command that prints the trace of a seed, its
// lines numbered as ReplayModelTrace's errors number them.
func SpinCommand(model string, flags []string, seed int) string {
	args := append(spinFlags(flags), simulation(seed)...)
	return "spin " + strings.Join(args, " ") + " " + model + " | grep '^QK'"
}

// RequireSpin skips the test when spin is not on PATH, unless
// QUOTAKEEPER_REQUIRE_SPIN=1 (CI) makes that a failure.
func RequireSpin(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("spin"); err == nil {
		return
	}
	if os.Getenv("QUOTAKEEPER_REQUIRE_SPIN") == "1" {
		tb.Fatal("spin is not installed (apt-get install spin)")
	}
	tb.Skip("spin is not installed (apt-get install spin); QUOTAKEEPER_REQUIRE_SPIN=1 fails instead")
}

// Model is the model preprocessed with one configuration's -D flags, for
// many simulations.
type Model struct {
	Flags []string
	file  string
}

// PrepareModel preprocesses the model file (an absolute path) into dir
// once, as spin itself would (its default preprocessor, gcc -E): spin
// otherwise runs the preprocessor for every simulation, which takes longer
// than the simulation.
func PrepareModel(ctx context.Context, dir, model string, flags []string) (*Model, error) {
	args := append([]string{"-std=gnu99", "-E", "-x", "c"}, spinFlags(flags)...)
	out, err := exec.CommandContext(ctx, "gcc", append(args, model)...).Output()
	if err != nil {
		return nil, fmt.Errorf("preprocess %s with %v: %w", model, flags, err)
	}
	f, err := os.CreateTemp(dir, "quota-*.pml")
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(out); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Model{Flags: flags, file: f.Name()}, f.Close()
}

// Simulate runs one random simulation and returns its QK lines. spin
// writes pan.pre where it runs, so concurrent runs each need a dir of
// their own. A simulation that fails one of the model's own assertions is
// an error: the model, not the ledger, is then wrong.
func (m *Model) Simulate(ctx context.Context, dir string, seed int) ([]string, error) {
	// -Pcat: the file is preprocessed already.
	args := append(append([]string{"-Pcat"}, simulation(seed)...), m.file)
	cmd := exec.CommandContext(ctx, "spin", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var trace []string
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "QK ") {
			trace = append(trace, strings.TrimRight(line, "\n"))
		}
	}
	if bytes.Contains(out, []byte("assertion violated")) {
		return trace, fmt.Errorf("the model fails its own assertion (%s):\n%s", SpinCommand("model/quota.pml", m.Flags, seed), out)
	}
	if err != nil {
		return nil, fmt.Errorf("spin %v: %w\n%s", args, err, out)
	}
	return trace, nil
}

// DescribeFailure says how a seed failed: the command that prints its
// trace (from the repository root), the error, and the trace numbered up
// to the line that failed.
func DescribeFailure(flags []string, seed int, trace []string, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, flags %v: %v\nits trace: %s\n", seed, flags, err, SpinCommand("model/quota.pml", flags, seed))
	last := len(trace)
	if te, ok := errors.AsType[*TraceError](err); ok {
		last = min(te.Line, last)
	}
	for i, text := range trace[:last] {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, text)
	}
	return b.String()
}

// TraceError is a replay's failure at one line of the trace.
type TraceError struct {
	Line int // 1-based, in the trace as given
	Text string
	Err  error
}

func (e *TraceError) Error() string {
	return fmt.Sprintf("trace line %d %q: %v", e.Line, e.Text, e.Err)
}

func (e *TraceError) Unwrap() error { return e.Err }

// The replay's one resource type (one bucket of its consumer), and its
// objects' namespace.
const (
	modelResourceType = "example.com/things"
	modelNamespace    = "tenant"
)

// modelTTL is the model's TTL of 2 ticks, a tick being a minute of the
// ledger's clock.
const modelTTL = 2 * time.Minute

// modelEpoch is the ledger's clock before the first tick.
var modelEpoch = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// ReplayModelTrace replays a trace (Model.Simulate's lines; any other line
// is skipped but numbered) on a new Ledger over store, and returns the
// first difference between model and ledger as a *TraceError.
func ReplayModelTrace(ctx context.Context, store ledger.Store, trace []string, opts ModelOptions) error {
	r, err := newReplay(ctx, store, opts)
	if err != nil {
		return err
	}
	settled := false
	for i, text := range trace {
		if !strings.HasPrefix(text, "QK ") {
			continue
		}
		if err := r.step(text); err != nil {
			return &TraceError{Line: i + 1, Text: text, Err: err}
		}
		settled = strings.HasPrefix(text, "QK settled ")
	}
	if !settled {
		return errors.New("the trace ends before the model settles (spin's depth limit?)")
	}
	return nil
}

// An object's state as the world lines leave it, for the use it commits.
type objectState int

const (
	inFlight objectState = iota + 1 // admitted, not stored yet
	live
	gone // denied, never stored, or deleted
)

type object struct {
	state  objectState
	amount int64 // what it counts (as requested while in flight)
	update int64 // a growing update in flight: the amount it asks for; 0: none
}

// use is what the object commits: its amount while admitted or live, and
// the growth of an update in flight (the model's USE_OF).
func (o *object) use() int64 {
	var n int64
	if o.state == inFlight || o.state == live {
		n = o.amount
	}
	if o.update > 0 {
		n += o.update - o.amount
	}
	return n
}

type replay struct {
	ctx    context.Context
	store  ledger.Store
	ledger *ledger.Ledger
	grants *ledger.GrantSet
	grant  ledger.Grant
	key    ledger.BucketKey
	// ticks is how many times the model's timers have run down, a minute
	// each on the ledger's clock (atomic: the ledger may read its clock on
	// a goroutine of its own). modelNow is the model's clock, which stops
	// at MAXT while the timers run on.
	ticks    atomic.Int64
	modelNow int64
	// bucket is the bucket as last read from the store, after each write.
	bucket ledger.Bucket
	// sums are the real ids of the model's sum slots; growths the ids of
	// the objects' growth reservations.
	sums    map[int64]string
	growths map[int64]string
	objects map[int64]*object
	// counted and freed gather an Observe's counted and free lines until
	// its observe line.
	counted map[string]ledger.CountedAt
	freed   []string
}

func newReplay(ctx context.Context, store ledger.Store, opts ModelOptions) (*replay, error) {
	if opts.Limit0 == 0 {
		opts.Limit0 = 3
	}
	if opts.CompactAbove == 0 {
		opts.CompactAbove = 1
	}
	if opts.Consumer == (ledger.Consumer{}) {
		opts.Consumer = ledger.Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "model"}
	}
	r := &replay{
		ctx: ctx, store: store, grants: ledger.NewGrantSet(),
		key:  ledger.NewBucketKey(opts.Consumer, modelResourceType, nil),
		sums: map[int64]string{}, growths: map[int64]string{}, objects: map[int64]*object{},
	}
	r.grant = ledger.Grant{ID: ledger.GrantID("quotakeeper-system", "model", 0), Generation: 1, Consumer: opts.Consumer, ResourceType: modelResourceType, Amount: opts.Limit0}
	if err := r.grants.Set(r.grant); err != nil {
		return nil, err
	}
	clock := func() time.Time { return modelEpoch.Add(time.Duration(r.ticks.Load()) * time.Minute) }
	r.ledger = ledger.New(store, r.grants, ledger.WithClock(clock),
		ledger.WithReservationTTL(modelTTL), ledger.WithCompactAbove(opts.CompactAbove))
	return r, nil
}

func uid(obj int64) string { return fmt.Sprintf("obj-%d", obj) }

// step replays one line, then checks COVER against the world the lines
// describe, whatever the model says.
func (r *replay) step(text string) error {
	l, err := parseLine(text)
	if err != nil {
		return err
	}
	if err := r.apply(l); err != nil {
		return err
	}
	reserved, err := r.bucket.Reserved()
	if err != nil {
		return err
	}
	if use := r.committed(); r.bucket.Allocated+reserved < use {
		return fmt.Errorf("COVER: the ledger's allocated %d + reserved %d is below the %d the live and in-flight objects use",
			r.bucket.Allocated, reserved, use)
	}
	return nil
}

func (r *replay) apply(l line) error {
	switch l.kind {
	case "tick":
		t := l.int("t")
		if l.err != nil {
			return l.err
		}
		if t != r.modelNow && t != r.modelNow+1 {
			return fmt.Errorf("the model's clock jumps from %d", r.modelNow)
		}
		r.modelNow = t
		r.ticks.Add(1)
	case "grant":
		return r.setGrant(l)
	case "reserve", "grow":
		return r.reserve(l)
	case "compact":
		return r.compact(l)
	case "counted":
		return r.countedLine(l)
	case "free":
		return r.free(l)
	case "observe":
		return r.observe(l)
	case "expire", "expire-growth":
		return r.expire(l)
	case "fold-created":
		return r.foldCreated(l)
	case "bucket":
		return r.compareBucket(l)
	case "stored", "never", "updated", "update-refused", "delete", "shrink":
		return r.world(l)
	case "restart", "rebuilt":
		// The observer's tally is the model's; the ledger sees none of it.
	case "settled":
		return r.settled(l)
	case "cover":
		return errors.New("the model's own COVER monitor fired: the model is wrong, not the ledger")
	default:
		return fmt.Errorf("unknown line kind %q", l.kind)
	}
	return nil
}

// read is the bucket as the store now holds it.
func (r *replay) read() error {
	b, ok, err := r.store.Get(r.ctx, r.key)
	if err != nil {
		return fmt.Errorf("read the bucket: %w", err)
	}
	if !ok {
		b = ledger.Bucket{Key: r.key}
	}
	r.bucket = b
	return nil
}

// committed is what the live and admitted in-flight objects use.
func (r *replay) committed() int64 {
	var n int64
	for _, o := range r.objects {
		n += o.use()
	}
	return n
}

func (r *replay) setGrant(l line) error {
	limit := l.int("limit")
	if l.err != nil {
		return l.err
	}
	r.grant.Amount, r.grant.Generation = limit, r.grant.Generation+1
	return r.grants.Set(r.grant)
}

// reserve is a create's reservation under the object's uid, or an update's
// growth under "<uid>/<generation>/1" with its total.
func (r *replay) reserve(l line) error {
	obj := l.int("obj")
	amount := l.int("amount")
	granted := l.int("granted")
	t := l.int("t")
	if l.err != nil {
		return l.err
	}
	if t != r.modelNow {
		return fmt.Errorf("t=%d, but the ticks say %d", t, r.modelNow)
	}
	id, total := uid(obj), int64(0)
	if l.kind == "grow" {
		gen := l.int("generation")
		if total = l.int("total"); l.err != nil {
			return l.err
		}
		id = fmt.Sprintf("%s/%d/1", uid(obj), gen)
	}
	claim := ledger.Claim{
		ID:     id,
		Object: ledger.ObjectRef{Kind: "Thing", Namespace: modelNamespace, Name: uid(obj), UID: uid(obj)},
		Requests: []ledger.Request{{
			Consumer: r.key.Consumer, ResourceType: modelResourceType, Amount: amount, Total: total,
		}},
	}
	d, err := r.ledger.Reserve(r.ctx, claim)
	if err != nil {
		return fmt.Errorf("reserve %s: %w", id, err)
	}
	if d.Granted != (granted == 1) {
		return fmt.Errorf("granted: model %d, ledger %v (%s)", granted, d.Granted, d.Message())
	}
	if err := r.read(); err != nil {
		return err
	}
	switch {
	case l.kind == "grow" && d.Granted:
		o := r.objects[obj]
		if o == nil {
			return fmt.Errorf("obj %d grows before it was created", obj)
		}
		o.update, r.growths[obj] = total, id
	case d.Granted:
		r.objects[obj] = &object{state: inFlight, amount: amount}
	case l.kind == "reserve":
		r.objects[obj] = &object{state: gone}
	}
	// LIMIT: an admission never takes the use past the grant.
	if use := r.committed(); d.Granted && use > r.grant.Amount {
		return fmt.Errorf("LIMIT: the live and in-flight objects use %d, past the grant of %d", use, r.grant.Amount)
	}
	return nil
}

// compact names the model's new sum slot: the reserve just before wrote
// the only sum the replay does not know yet.
func (r *replay) compact(l line) error {
	slot := l.int("sum")
	amount := l.int("amount")
	if l.err != nil {
		return l.err
	}
	known := map[string]bool{}
	for _, id := range r.sums {
		known[id] = true
	}
	var fresh []string
	for id := range r.bucket.Reservations {
		if ledger.IsSum(id) && !known[id] {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) != 1 {
		return fmt.Errorf("model compacted into sum slot %d, ledger wrote %d new sums %v", slot, len(fresh), fresh)
	}
	r.sums[slot] = fresh[0]
	if got := r.bucket.Reservations[fresh[0]].Amount; got != amount {
		return fmt.Errorf("sum slot %d (%s) amount: model %d, ledger %d", slot, fresh[0], amount, got)
	}
	return nil
}

func (r *replay) countedLine(l line) error {
	obj := l.int("obj")
	gen := l.int("generation")
	amount := l.int("amount")
	if l.err != nil {
		return l.err
	}
	if r.counted == nil {
		r.counted = map[string]ledger.CountedAt{}
	}
	r.counted[uid(obj)] = ledger.CountedAt{Generation: gen, Amount: amount}
	return nil
}

// free is a sum the coming Observe frees by naming it in Fold.
func (r *replay) free(l line) error {
	slot := l.int("sum")
	amount := l.int("amount")
	if l.err != nil {
		return l.err
	}
	id, ok := r.sums[slot]
	if !ok {
		return fmt.Errorf("sum slot %d was never compacted into", slot)
	}
	if got := r.bucket.Reservations[id].Amount; got != amount {
		return fmt.Errorf("sum slot %d (%s) amount: model %d, ledger %d", slot, id, amount, got)
	}
	r.freed = append(r.freed, id)
	return nil
}

// observe is one Observe: the counted lines before it, the sums freed, and
// every reservation the counted objects account for folded by the ledger's
// own rule (Counted), which is what the model's fold rule stands for.
func (r *replay) observe(l line) error {
	allocated := l.int("allocated")
	if l.err != nil {
		return l.err
	}
	obs := ledger.Observation{Allocated: allocated, Count: int64(len(r.counted)), Counted: r.counted, Fold: r.freed}
	var tally int64
	for _, c := range r.counted {
		tally += c.Amount
	}
	if tally != allocated {
		return fmt.Errorf("the counted lines sum to %d, not the allocated the model writes", tally)
	}
	if allocated > 0 {
		obs.ByNamespace = map[string]int64{modelNamespace: allocated}
	}
	r.counted, r.freed = nil, nil
	if _, err := r.ledger.Observe(r.ctx, r.key, obs); err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	return r.read()
}

// expire is an Observe that only expires one reservation: the figures are
// the bucket's own, and nothing is counted that could fold another.
func (r *replay) expire(l line) error {
	obj := l.int("obj")
	if l.err != nil {
		return l.err
	}
	id := uid(obj)
	if l.kind == "expire-growth" {
		if id = r.growths[obj]; id == "" {
			return fmt.Errorf("obj %d has no growth reserved", obj)
		}
	}
	b := r.bucket
	obs := ledger.Observation{Allocated: b.Allocated, ByNamespace: b.ByNamespace, Count: b.Count, Expire: []string{id}}
	if _, err := r.ledger.Observe(r.ctx, r.key, obs); err != nil {
		return fmt.Errorf("observe expiring %s: %w", id, err)
	}
	return r.read()
}

func (r *replay) foldCreated(l line) error {
	obj := l.int("obj")
	amount := l.int("amount")
	if l.err != nil {
		return l.err
	}
	created := []ledger.Created{{UID: uid(obj), Namespace: modelNamespace, Amount: amount}}
	if _, err := r.ledger.FoldCreated(r.ctx, r.key, created, nil); err != nil {
		return fmt.Errorf("fold created: %w", err)
	}
	return r.read()
}

// compareBucket checks the stored bucket against the model's, exactly:
// allocated, and every reservation by id with its amount, nothing more.
func (r *replay) compareBucket(l line) error {
	allocated := l.int("allocated")
	if l.err != nil {
		return l.err
	}
	want := map[string]int64{}
	name := map[string]string{} // what each id is in the model's terms
	for _, part := range []struct {
		field string
		id    func(int64) (string, error)
	}{
		{"reservations", func(o int64) (string, error) { return uid(o), nil }},
		{"growths", func(o int64) (string, error) {
			if id := r.growths[o]; id != "" {
				return id, nil
			}
			return "", fmt.Errorf("the model holds a growth of obj %d, which the trace never granted", o)
		}},
		{"sums", func(s int64) (string, error) {
			if id := r.sums[s]; id != "" {
				return id, nil
			}
			return "", fmt.Errorf("the model holds sum slot %d, which the trace never compacted into", s)
		}},
	} {
		amounts, err := l.list(part.field)
		if err != nil {
			return err
		}
		for i, amount := range amounts {
			if amount == 0 {
				continue
			}
			id, err := part.id(int64(i))
			if err != nil {
				return err
			}
			want[id], name[id] = amount, fmt.Sprintf("%s[%d] %s", part.field, i, id)
		}
	}
	leases, err := l.list("leases")
	if err != nil {
		return err
	}
	if slices.ContainsFunc(leases, func(n int64) bool { return n != 0 }) {
		return errors.New("the model holds leases: replay traces of -DNOLEASES")
	}

	var diffs []string
	if r.bucket.Allocated != allocated {
		diffs = append(diffs, fmt.Sprintf("allocated: model %d, ledger %d", allocated, r.bucket.Allocated))
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		got, ok := r.bucket.Reservations[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: model %d, ledger none", name[id], want[id]))
		case got.Amount != want[id]:
			diffs = append(diffs, fmt.Sprintf("%s: model %d, ledger %d", name[id], want[id], got.Amount))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(r.bucket.Reservations)) {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: model none, ledger %d", r.describe(id), r.bucket.Reservations[id].Amount))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("bucket differs: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// describe names a real reservation id in the model's terms.
func (r *replay) describe(id string) string {
	for s, sid := range r.sums {
		if sid == id {
			return fmt.Sprintf("sums[%d] %s", s, id)
		}
	}
	for o, gid := range r.growths {
		if gid == id {
			return fmt.Sprintf("growths[%d] %s", o, id)
		}
	}
	if ledger.IsSum(id) {
		return "unknown sum " + id
	}
	return "reservation " + id
}

// world follows what the API server and the tenants did to the objects:
// no ledger call, but they make the use COVER and LIMIT are judged by.
func (r *replay) world(l line) error {
	obj := l.int("obj")
	if l.err != nil {
		return l.err
	}
	o := r.objects[obj]
	if o == nil {
		return fmt.Errorf("obj %d was never reserved", obj)
	}
	switch l.kind {
	case "stored":
		o.state = live
	case "never":
		o.state, o.amount = gone, 0
	case "updated":
		if o.amount = l.int("amount"); l.err != nil {
			return l.err
		}
		o.update = 0
	case "update-refused":
		o.update = 0
	case "delete":
		o.state, o.amount = gone, 0
	case "shrink":
		o.amount = 1 // the model's objects grow from 1 to 2 and shrink back
	}
	return nil
}

// settled is the model at quiescence: its allocated and reserved, and the
// live objects' use, which the world lines must agree with.
func (r *replay) settled(l line) error {
	if len(r.counted) > 0 || len(r.freed) > 0 {
		return errors.New("counted or free lines with no observe line after them")
	}
	var diffs []string
	for _, f := range []struct {
		field  string
		ledger int64
	}{
		{"allocated", r.bucket.Allocated},
		{"live", r.liveUse()},
	} {
		want := l.int(f.field)
		if l.err != nil {
			return l.err
		}
		if want != f.ledger {
			diffs = append(diffs, fmt.Sprintf("%s: model %d, replay %d", f.field, want, f.ledger))
		}
	}
	reserved, err := r.bucket.Reserved()
	if err != nil {
		return err
	}
	if want := l.int("reserved"); l.err != nil || want != reserved {
		diffs = append(diffs, fmt.Sprintf("reserved: model %d, ledger %d (%v)", want, reserved, l.err))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("settled differently: %s", strings.Join(diffs, "; "))
	}
	return nil
}

func (r *replay) liveUse() int64 {
	var n int64
	for _, o := range r.objects {
		if o.state == live {
			n += o.amount
		}
	}
	return n
}

// line is one parsed "QK <kind> key=value ..." line.
type line struct {
	kind string
	args map[string]string
	err  error // the first field int could not read
}

func parseLine(text string) (line, error) {
	fields := strings.Fields(text)
	if len(fields) < 2 || fields[0] != "QK" {
		return line{}, errors.New("not a QK line")
	}
	l := line{kind: fields[1], args: map[string]string{}}
	for _, f := range fields[2:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return line{}, fmt.Errorf("field %q is not key=value", f)
		}
		l.args[k] = v
	}
	return l, nil
}

// int reads key's integer. The first field missing or malformed is kept in
// l.err (and 0 returned), so a caller reads every field it needs and checks
// once.
func (l *line) int(key string) int64 {
	v, ok := l.args[key]
	if !ok {
		l.fail(fmt.Errorf("no %s= on the line", key))
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		l.fail(fmt.Errorf("%s=%s: %w", key, v, err))
	}
	return n
}

func (l *line) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

// list reads a "1,0,2," field.
func (l line) list(key string) ([]int64, error) {
	v, ok := l.args[key]
	if !ok {
		return nil, fmt.Errorf("no %s= on the line", key)
	}
	var out []int64
	for _, s := range strings.Split(strings.TrimSuffix(v, ","), ",") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", key, v, err)
		}
		out = append(out, n)
	}
	return out, nil
}
