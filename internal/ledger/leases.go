package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Capacity leases: admission without a synchronous write
// (docs/design/leases.md).
//
// A process that holds a lease of L units of a bucket's headroom admits
// creates inside it locally, and records what it admitted asynchronously,
// every LeaseOptions.Interval, as ordinary per-object reservations, in the
// same compare-and-swap write that renews the lease and sizes it again. The
// lease is stored in the bucket as a reservation, so reserved, available and
// every other replica's limit check count it:
//   - ClaimID "lease/<holder>/<n>" (IsLease), n rising in the holder;
//   - Amount, what the holder may still admit plus what it admitted and has
//     not recorded yet;
//   - ExpiresAt, when the lease lapses unless renewed;
//   - Object, LeaseObject(holder).
//
// Why it never admits past the limit:
//   - a lease is written only where it fits (limit − allocated − every other
//     reservation), and it is only ever a share of that headroom
//     (LeaseOptions.Share), none below LeaseOptions.MinCreates creates: near
//     the limit every replica is back on the synchronous path, which is exact;
//   - the lease's stored amount always covers what was admitted inside it and
//     not recorded: an admission needs used+amount ≤ granted, and a write
//     stores at least what admissions during its flight may use (flightCap);
//   - recording moves an admission from the lease's amount to a reservation
//     under its object's uid in one write, which the observer folds like any
//     create's (a reservation that arrives after its object was counted is
//     folded at the next write: counted twice until then, never less);
//   - the holder admits nothing once its lease could have lapsed
//     (usableUntil, a second before expiresAt by its own clock), and never
//     writes a lapsed lease again: a new lease takes a new id. The observer
//     treats a lease as lapsed only LeaseSkew after its expiresAt, and then
//     frees it like a sum: behind the barrier that proves every object
//     admitted under it counted (package observer, barrier.go), because a
//     crashed holder may have admitted all of it without recording;
//   - a lease is used only for creates (bare uid ids, objects outside the
//     quota group, no Total): update growths, Allocation claims and
//     namespace moves have fold rules of their own and stay synchronous;
//   - a lowered limit takes effect at once: a local admission needs the
//     limit the grants give now to be at least the one the lease was sized
//     against.
//
// The cost is precision: headroom leased to one replica is refused to the
// others while the lease holds it, and a lapsed lease counts until the
// barrier passes.
const LeasePrefix = "lease/"

// LeaseSkew is how long after a lease's expiresAt the observer takes it for
// lapsed: the holder's clock and the manager's may differ by this much.
const LeaseSkew = 10 * time.Second

// leaseKind is the Kind of the object a lease names (in the quota group, as
// a sum's): a label for operators, not an object of the API. Its uid is the
// id's first segment, so the bucket's string form needs no "uid=".
const (
	leaseKind = "CapacityLease"
	leaseUID  = "lease"
)

// IsLease reports whether a reservation id names a capacity lease.
func IsLease(id string) bool { return strings.HasPrefix(id, LeasePrefix) }

// LeaseLapsed reports whether r is a lease its holder can no longer use
// (LeaseSkew after its expiresAt): the observer then frees it like a sum.
func LeaseLapsed(r Reservation, now time.Time) bool {
	return IsLease(r.ClaimID) && !now.Before(r.ExpiresAt.Add(LeaseSkew))
}

// leaseResize is how often a held lease is sized again to the bucket's
// headroom when nothing else writes it.
const leaseResize = time.Second

// LeaseObject is the object a lease of holder names.
func LeaseObject(holder string) ObjectRef {
	return ObjectRef{APIGroup: sumGroup, Kind: leaseKind, Name: holder, UID: leaseUID}
}

// LeaseOptions configure capacity leases (WithLeases). Zero fields take the
// defaults.
type LeaseOptions struct {
	// Holder names this process among every writer of the buckets (a
	// Gatekeeper pod's name): a DNS label. Two processes must never share
	// one, so WithLeases adds the start time to it.
	Holder string
	// Duration is how long a lease written now holds unless renewed
	// (default 30 s). A crashed holder's lease holds its amount this long,
	// then until the observer's barrier passes.
	Duration time.Duration
	// Interval is how often admissions are recorded and leases renewed
	// (default 100 ms): how long an admitted create is known only to its
	// replica.
	Interval time.Duration
	// Share: a lease is 1/Share of the bucket's headroom (default 16).
	Share int64
	// MinCreates: no lease smaller than this many of the bucket's largest
	// create (default 32), so the last of the quota is decided
	// synchronously and the limit is reached exactly.
	MinCreates int64
	// Idle: a lease not used for this long is given back (default 10 s).
	Idle time.Duration
}

func (o LeaseOptions) withDefaults() LeaseOptions {
	if o.Duration <= 0 {
		o.Duration = 30 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Share <= 0 {
		o.Share = 16
	}
	if o.MinCreates <= 0 {
		o.MinCreates = 32
	}
	if o.Idle <= 0 {
		o.Idle = 10 * time.Second
	}
	return o
}

// WithLeases turns capacity leases on: RunLeases takes and records them,
// and Reserve admits creates inside them while it runs.
func WithLeases(o LeaseOptions) Option {
	return func(l *Ledger) {
		o = o.withDefaults()
		if o.Holder == "" {
			o.Holder = "holder"
		}
		o.Holder += "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		l.leases = &leases{opts: o, buckets: map[BucketKey]*lease{}, wake: make(chan struct{}, 1)}
	}
}

// leases is a Ledger's lease holder.
type leases struct {
	opts LeaseOptions
	// wake asks the runner for a round now: a bucket wants a lease.
	wake chan struct{}

	mu sync.Mutex
	// running: RunLeases is recording; only then is anything admitted
	// locally, since nothing else would record it.
	running bool
	seq     int64
	buckets map[BucketKey]*lease
}

// lease is one bucket's lease as this process holds it.
type lease struct {
	id string // "" while none is held
	// granted is what may be admitted against the lease: its stored amount,
	// or less while it is being shrunk.
	granted int64
	// stored is the lease's amount as last written; lastWrite, when.
	stored    int64
	lastWrite time.Time
	// used is what was admitted against it and is not recorded yet.
	used int64
	// pending are those admissions, by claim id.
	pending map[string]Reservation
	// limit is the limit the lease was sized against.
	limit int64
	// usableUntil: nothing is admitted locally after it (a second before
	// the stored expiresAt, by this process's clock).
	usableUntil time.Time
	// figures are the bucket's numbers after the last write, for the
	// decisions admitted locally.
	figures  Usage
	lastUsed time.Time
	// wanted: a create that could have used a lease went the synchronous
	// way.
	wanted bool
	// unit is the largest create seen, which sizes MinCreates.
	unit int64
	// closing: the lease is being given back; nothing more is admitted.
	closing bool
}

// leasable reports whether a claim may be admitted inside leases: a create
// (Compactable's conditions: its object reaches the API server within the
// request deadline or never does, which the barrier that frees a lapsed
// lease relies on).
func leasable(claim Claim) bool {
	if strings.Contains(claim.ID, "/") || claim.Object.APIGroup == sumGroup {
		return false
	}
	for _, r := range claim.Requests {
		if r.Total != 0 {
			return false
		}
	}
	return true
}

// reserveLeased admits claim inside this process's leases with no write,
// when every bucket it touches has a lease with room; ok false sends it the
// synchronous way (and asks the runner for the leases it lacked).
func (l *Ledger) reserveLeased(claim Claim) (d Decision, t Taken, ok bool) {
	ls := l.leases
	if ls == nil || !leasable(claim) {
		return Decision{}, Taken{}, false
	}
	ts, err := l.targets(claim)
	if err != nil {
		return Decision{}, Taken{}, false // the synchronous path reports it
	}
	now := l.now().Round(0)
	expires := now.Add(l.ttl).Truncate(time.Microsecond)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	fits, replay := ls.running, true
	for _, t := range ts {
		if t.limitErr != nil {
			return Decision{}, Taken{}, false
		}
		le := ls.buckets[t.key]
		if le == nil {
			le = &lease{}
			ls.buckets[t.key] = le
		}
		le.unit = max(le.unit, t.req.Amount)
		held, isHeld := le.pending[claim.ID]
		replay = replay && isHeld && held.Amount >= t.req.Amount
		if isHeld {
			continue
		}
		if le.id == "" || le.closing || !now.Before(le.usableUntil) || t.limit < le.limit || le.used+t.req.Amount > le.granted {
			fits = false
			if !le.closing {
				le.wanted = true
			}
		}
	}
	if !replay && (!fits || anyPending(ls, ts, claim.ID)) {
		// Wakes the runner (or its first round, if it has not started).
		select {
		case ls.wake <- struct{}{}:
		default:
		}
		return Decision{}, Taken{}, false
	}
	d = Decision{Granted: true, Requests: make([]RequestDecision, len(ts))}
	for i, t := range ts {
		le := ls.buckets[t.key]
		if !replay {
			le.used += t.req.Amount
			if le.pending == nil {
				le.pending = map[string]Reservation{}
			}
			le.pending[claim.ID] = Reservation{ClaimID: claim.ID, Object: claim.Object, Amount: t.req.Amount, ExpiresAt: expires}
			le.lastUsed = now
		}
		d.Requests[i] = RequestDecision{Request: t.req, Bucket: t.name, Granted: true, Reason: ReasonQuotaAvailable}
		d.Requests[i].setUsage(le.figures)
		d.Requests[i].setMessage()
	}
	if replay {
		return d, Taken{}, true
	}
	t = Taken{claim: claim, expires: expires, keys: make([]BucketKey, len(ts)), leased: true}
	t.claim.Requests = append([]Request(nil), claim.Requests...)
	for i, tg := range ts {
		t.keys[i] = tg.key
	}
	return d, t, true
}

// anyPending reports whether some bucket of ts holds claimID pending: a
// claim half-admitted locally goes the synchronous way as a whole.
func anyPending(ls *leases, ts []target, claimID string) bool {
	for _, t := range ts {
		if _, ok := ls.buckets[t.key].pending[claimID]; ok {
			return true
		}
	}
	return false
}

// undoLeased gives back what t admitted locally and is still pending (the
// lease's room grows again) and returns the buckets where it was recorded
// already, for Undo to remove as reservations. A reservation in a write
// that is in flight is neither: it stays held until it expires or its
// object is counted (conservative).
func (l *Ledger) undoLeased(t Taken) []BucketKey {
	ls := l.leases
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var recorded []BucketKey
	for _, key := range t.keys {
		le := ls.buckets[key]
		if le == nil {
			recorded = append(recorded, key)
			continue
		}
		if r, ok := le.pending[t.claim.ID]; ok && r.ExpiresAt.Equal(t.expires) {
			delete(le.pending, t.claim.ID)
			le.used -= r.Amount
			continue
		}
		recorded = append(recorded, key)
	}
	return recorded
}

// RunLeases takes, renews, records and gives back leases until ctx ends,
// then gives every lease back (recording what was admitted). Reserve admits
// inside leases only while it runs. It returns nil at once when leases are
// off.
func (l *Ledger) RunLeases(ctx context.Context) error {
	ls := l.leases
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	if ls.running {
		ls.mu.Unlock()
		return errors.New("ledger: RunLeases is already running")
	}
	ls.running = true
	ls.mu.Unlock()
	tick := time.NewTicker(ls.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			ls.mu.Lock()
			ls.running = false
			for _, le := range ls.buckets {
				le.closing = true
			}
			ls.mu.Unlock()
			// Give back within a bounded time: what cannot be written lapses.
			done, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return l.leaseRound(done)
		case <-tick.C:
		case <-ls.wake:
		}
		_ = l.leaseRound(ctx) // a failed write is tried again next round; the lease lapses meanwhile if it must
	}
}

// leaseRound writes every bucket that has admissions to record, wants a
// lease, or holds one due for renewal or return, each in one write, side
// by side. RunLeases calls it one round at a time and each round waits for
// its writes, so no bucket's lease is ever written twice at once.
func (l *Ledger) leaseRound(ctx context.Context) error {
	ls := l.leases
	now := l.now()
	type job struct {
		key BucketKey
		le  *lease
	}
	var jobs []job
	ls.mu.Lock()
	for key, le := range ls.buckets {
		if le.id != "" && !le.closing && now.Sub(le.lastUsed) > ls.opts.Idle && len(le.pending) == 0 {
			le.closing = true
		}
		// A held lease is written again to renew it, to give back what a
		// shrink left stored, and once a second to size it to the headroom
		// (near the limit it comes back within a second or two).
		renew := le.id != "" && (le.usableUntil.Sub(now) < ls.opts.Duration/2 || le.stored > le.granted || now.Sub(le.lastWrite) >= leaseResize)
		if len(le.pending) > 0 || le.closing && le.id != "" || le.wanted && le.id == "" || renew {
			jobs = append(jobs, job{key, le})
		}
		if le.id == "" && !le.wanted && len(le.pending) == 0 {
			delete(ls.buckets, key) // nothing held, nothing wanted
		}
	}
	ls.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.writeLease(ctx, j.key, j.le)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeLease is one bucket's lease write: it records the pending
// admissions, and renews the lease at a new size (or gives it back), in one
// compare-and-swap.
func (l *Ledger) writeLease(ctx context.Context, key BucketKey, le *lease) error {
	ls := l.leases
	start := l.now()

	ls.mu.Lock()
	batch := le.pending
	le.pending = nil
	var recordedAmount int64
	for _, r := range batch {
		recordedAmount += r.Amount
	}
	// What admissions during the write may still use: the write stores at
	// least that, so whatever they admit stays covered.
	flightCap := max(le.granted-le.used, 0)
	if le.id != "" && !start.Before(le.usableUntil) {
		// It may have lapsed: it is never renewed, only given back with
		// everything admitted under it recorded in the same write (a new
		// lease takes a new id).
		le.closing = true
	}
	if le.closing {
		flightCap = 0
		le.usableUntil = time.Time{}
	}
	id, fresh := le.id, false
	if id == "" {
		ls.seq++
		id, fresh = LeasePrefix+ls.opts.Holder+"/"+strconv.FormatInt(ls.seq, 10), true
	}
	closing, unit := le.closing, le.unit
	ls.mu.Unlock()

	var amount, target, limit int64
	stored, err := l.store.Apply(ctx, key, func(b *Bucket) error {
		at := l.now().Truncate(time.Microsecond)
		if b.Reservations == nil {
			b.Reservations = map[string]Reservation{}
		}
		_, had := b.Reservations[id]
		recorded := 0
		for cid, r := range batch {
			if _, held := b.Reservations[cid]; held {
				continue // held already (a synchronous reserve of the same claim)
			}
			b.Reservations[cid] = r
			recorded++
		}
		delete(b.Reservations, id)
		target = 0
		lim, contribs, limErr := limitFor(l.grants, key)
		if limErr == nil {
			// As a reserving write: the lower of the cache's limit and
			// the recorded one (target.limitIn), recorded only on a
			// bucket that records none.
			limit = limitIn(b, lim)
			recordNewLimit(b, lim, contribs)
			u, err := Bucket{Limit: limit, Allocated: b.Allocated, Reservations: b.Reservations}.Usage()
			if err == nil && !closing && u.Available > 0 {
				target = u.Available / ls.opts.Share
				if target/ls.opts.MinCreates < max(unit, 1) { // target < MinCreates × unit, without overflow
					target = 0
				}
			}
		} else {
			limit = b.Limit
		}
		amount = max(target, flightCap)
		if amount > 0 {
			b.Reservations[id] = Reservation{ClaimID: id, Object: LeaseObject(ls.opts.Holder), Amount: amount, ExpiresAt: at.Add(ls.opts.Duration)}
		}
		if recorded == 0 && !had && amount == 0 {
			return errUnchanged
		}
		// Recording adds reservations as a reserving write does: it
		// compacts them the same way, so the bucket stays bounded while
		// nobody folds (sums.go).
		_, err := compact(b.Reservations, id, l.compactAbove(), at)
		return err
	})
	if errors.Is(err, errUnchanged) {
		err, stored = nil, Bucket{}
	}

	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err != nil {
		// Unknown whether it was written: the batch is recorded again next
		// time (a write skips what the bucket holds already), and the lease
		// is used as it was until it could lapse.
		if le.pending == nil {
			le.pending = batch
		} else {
			maps.Copy(le.pending, batch)
		}
		return fmt.Errorf("lease %s in bucket %s: %w", id, key.Name(), err)
	}
	le.used -= recordedAmount
	le.lastWrite = start
	if amount == 0 {
		le.id, le.granted, le.stored, le.closing, le.wanted = "", 0, 0, false, false
		le.usableUntil = time.Time{}
		return nil
	}
	le.id, le.limit = id, limit
	le.granted, le.stored = amount, amount
	if target < amount {
		// Shrinking: the stored amount covers admissions made during the
		// write; from now on only target more, and the next write stores
		// the smaller amount.
		le.granted = max(le.used, target)
	}
	if !closing {
		le.usableUntil = start.Add(ls.opts.Duration - time.Second)
	}
	if fresh {
		le.wanted = false
		le.lastUsed = start
	}
	if u, err := stored.Usage(); err == nil {
		le.figures = u
	}
	return nil
}
