/*
 * quotakeeper's quota protocol, one bucket, as a Promela model for SPIN
 * (make model; docs/design/model.md says how to read and extend it).
 *
 * Who acts:
 *   world      the tenants and the API server: creates and growing updates
 *              reserved synchronously by any Gatekeeper replica (a CAS write
 *              on the bucket), admitted requests stored within DEADLINE or
 *              never, deletes, shrinks, the one grant change, and the clock
 *              (a tick runs every timer down; the observer takes a lapsed
 *              lease as it lapses);
 *   replica(r) a Gatekeeper replica's capacity lease: take, admit inside it
 *              with no write, record what it admitted, give back, crash;
 *   observer   the manager's tally: informer deliveries, Observe (fold and
 *              allocated in one write), expiry, the barrier that frees sums
 *              and lapsed leases, one restart with its rebuild and
 *              FoldCreated meanwhile.
 *
 * What is checked (every interleaving, exhaustively, within the scope):
 *   LIMIT    no admission takes what the objects admitted and not gone use
 *            past the grant (asserted at each admission: an object exists
 *            only if admitted, so the live objects never exceed the limit
 *            but by what a lowered grant leaves);
 *   COVER    allocated + reserved never below what the live and in-flight
 *            objects use (monitor: at every state);
 *   SETTLED  at quiescence allocated equals the live objects' use, and no
 *            reservation, sum or lease is left: every admitted object is
 *            counted, and nothing outlives its object and TTL.
 *
 * Abstractions, each sound for these properties:
 *   - a CAS write (read, mutate, compare-and-swap, retried on conflict) is
 *     one atomic step on the bucket as it is then; what a writer computed
 *     before the write (the observer's tally, a replica's lease remainder)
 *     is state of its own, read earlier, so it can be stale: the ledger's
 *     mutate functions are pure functions of the bucket and such inputs
 *     (internal/ledger/doc.go);
 *   - one clock for every process: the code's margins for skew (LeaseSkew,
 *     the observer's own ReservationClock) are what make its clocks one;
 *   - every object counts 1 when created; objects 0 and 1 may grow to 2 in
 *     one update and shrink back; objects are used once (a new object has a
 *     new uid); object 0 has metadata.generation (an update bumps it),
 *     object 1 has not (a ConfigMap: one generation through every update,
 *     the weaker fold key);
 *   - the informer and the evaluation queue are one delivery per object
 *     event, in any order across objects, coalesced to the newest state;
 *     the observer delivers before the clock ticks (it lags by far less than
 *     a TTL: a growth's expiry trusts what it has seen), and the barrier's three
 *     checks are one: every event up to the revision it read is delivered;
 *   - the observer sees a sum the moment it is written and takes a lease
 *     the tick it lapses: the earliest it could, so each barrier starts as
 *     early as it can (seeing later only keeps the amount reserved longer);
 *   - a restart's rebuild ends before the clock ticks again (FoldCreated
 *     runs meanwhile; nothing expires during a rebuild, as in the code);
 *   - sums are never merged (MaxSums is not reached in this scope; a merge
 *     writes a new sum, seen later, which only delays its free), and only
 *     the synchronous reserve compacts;
 *   - grant caches are current: the grant change reaches every writer at
 *     once; the stale-grants scopes (-DSTALE_GRANTS) give each writer a
 *     cache of its own and the bucket a recorded limit, and check LIMIT as
 *     a lowered grant binds once known (below).
 *
 * The scope: up to 2 replicas with leases (LEASERS), 3 or 4 objects (NOBJ),
 * 4 sum slots, one grant change, one restart (none with -DNORESTART), one
 * replica crash; the limits, the compaction threshold and the tenants' time
 * are -D settings too. hack/model/check.sh lists the scopes make model and
 * make test check, and the seeded bugs (-DBUG_...) each must fail; so must
 * each assumption relaxed: -DDEADLINE=3 (a request stored after the TTL),
 * -DSLOW_OBSERVER (an observer more than a TTL behind).
 *
 * Each action prints one "QK ..." line: spin -t replays a counterexample as
 * the sequence of actions (make model), and the conformance test drives the
 * real ledger through random simulations of it and compares its bucket with
 * each "QK bucket" line (internal/ledger/conformance_test.go).
 */

#define NREP 2          /* Gatekeeper replicas with leases */
#ifndef NOBJ
#define NOBJ 3          /* objects the tenants create, in order: 3 or 4 */
#endif
#define NSUM 4          /* sum slots, never reused */
#ifndef LIMIT0
#define LIMIT0 3        /* the grant */
#endif
#ifndef LIMIT1
#define LIMIT1 1        /* the grant after the one change (lowered) */
#endif
#ifndef COMPACT
#define COMPACT 1       /* the reserving write compacts above this many create reservations */
#endif
#ifndef MAXT
#define MAXT 3          /* tenants act while now < MAXT */
#endif
#define TTL 2           /* a reservation's time to live */
#ifndef DEADLINE
#define DEADLINE 2      /* an admitted request is stored within it, or never (<= TTL) */
#endif
#define BARRIER 3       /* the barrier's wait after a sum is first seen (> DEADLINE) */
#define LTTL 3          /* a lease's lifetime from its last renewal */
#define SKEW 1          /* the observer takes a lease for lapsed SKEW after its expiry */
#define LFLOOR 2        /* no lease below this headroom */
#define UNSEEN 255

/* object states */
#define NONE 0
#define INFL 1          /* admitted, not stored yet */
#define LIVE 2
#define GONE 3          /* denied, never stored, or deleted */

/* the unrolled scope */
#if NOBJ == 4
#define EACH_OBJ(A) A(0) A(1) A(2) A(3)
#define ALL_OBJ(P) (P(0) && P(1) && P(2) && P(3))
#define ANY_OBJ(P) (P(0) || P(1) || P(2) || P(3))
#define SUM_OBJ(F) (F(0) + F(1) + F(2) + F(3))
#else
#define EACH_OBJ(A) A(0) A(1) A(2)
#define ALL_OBJ(P) (P(0) && P(1) && P(2))
#define ANY_OBJ(P) (P(0) || P(1) || P(2))
#define SUM_OBJ(F) (F(0) + F(1) + F(2))
#endif
#define EACH_GROWN(A) A(0) A(1)   /* the objects that may grow: one with a generation, one without */
#define EACH_SUM(A) A(0) A(1) A(2) A(3)
#define EACH_REP(A) A(0) A(1)
#define ANY_SUM(P) (P(0) || P(1) || P(2) || P(3))
#define ALL_SUM(P) (P(0) && P(1) && P(2) && P(3))

byte now;              /* the clock, up to MAXT; after it only timers run */
byte grant = LIMIT0;
bit lowered;

/* the bucket */
byte alloc;
byte res[NOBJ];         /* create reservation under the object's uid */
byte rttl[NOBJ];        /* ticks until its TTL has passed */
byte gres[NOBJ];        /* an update's growth, "<uid>/<generation>/<growth>" */
byte gtot[NOBJ];        /* its total */
byte ggen[NOBJ];        /* its generation */
byte gttl[NOBJ];
byte sumAmt[NSUM];
byte nsum;
byte lease[NREP];
byte lttl[NREP];        /* ticks until the observer takes it for lapsed: LTTL + SKEW from its last write */

/* the objects */
byte next;              /* the next object a create names */
byte ost[NOBJ];
byte oamt[NOBJ];        /* what it counts (as requested while in flight) */
byte ogen[NOBJ];
byte odl[NOBJ];         /* ticks until a create in flight reaches its deadline */
byte upd[NOBJ];         /* a growing update in flight: its new amount */
byte udl[NOBJ];
byte oev[NOBJ];         /* events of the object so far */
bit grown[NOBJ];

/* the observer */
byte seenAmt[NOBJ];
byte seenGen[NOBJ];
byte seenEv[NOBJ];
byte sumWait[NSUM] = UNSEEN;  /* UNSEEN, or ticks left of the barrier's wait since the observer first saw it */
bit rebuilding;
bit restarted;
bit barOn;
byte barSet;            /* sums the barrier in progress frees */
byte evR[NOBJ];         /* events up to the revision it read */

/* the replicas */
bit held[NREP];
byte rem[NREP];
byte llim[NREP];        /* the limit the lease was sized against */
byte unrec[NREP];       /* objects admitted inside the lease, not recorded */
bit crashed;

/* scratch inside atomic steps, hidden from the state vector; breadth-first
 * search (the seeded bugs' shortest trails) refuses hidden variables */
#ifdef BREADTH_FIRST
byte ix, acc;
#else
hidden byte ix, acc;
#endif

#ifdef STALE_GRANTS
byte gview[NREP + 2] = LIMIT0;   /* the replicas', the tenants' replica's (NREP), the observer's (NREP+1) */
#define VIEW(w) gview[w]
#else
#define VIEW(w) grant
#endif
#define WORLD NREP
#define OBS (NREP + 1)

#define RES_OF(o) (res[o] + gres[o])
#define RESERVED (SUM_OBJ(RES_OF) + sumAmt[0] + sumAmt[1] + sumAmt[2] + sumAmt[3] + lease[0] + lease[1])
#define USE_OF(o) (((ost[o] == INFL || ost[o] == LIVE) -> oamt[o] : 0) + ((upd[o] > 0) -> upd[o] - oamt[o] : 0))
#define COMMITTED SUM_OBJ(USE_OF)
#define SEEN_OF(o) seenAmt[o]
#define TALLY SUM_OBJ(SEEN_OF)
#define LIVE_OF(o) ((ost[o] == LIVE) -> oamt[o] : 0)
#define LIVEUSE SUM_OBJ(LIVE_OF)
#define COVER (alloc + RESERVED >= COMMITTED)

/* the fold rule (ledger.Reservation.FoldedBy): a create counted at all,
 * a growth counted at its generation and at least its total */
#define FOLDS_CREATE(o) (seenAmt[o] > 0)
#ifdef BUG_FOLD_WITHOUT_TOTAL
#define FOLDS_GROWTH(o) (seenAmt[o] > 0 && seenGen[o] >= ggen[o])
#else
#define FOLDS_GROWTH(o) (seenGen[o] >= ggen[o] && seenAmt[o] >= gtot[o])
#endif
#define FOLDABLE(o) ((res[o] > 0 && FOLDS_CREATE(o)) || (gres[o] > 0 && FOLDS_GROWTH(o)))

/* LIMIT, right after an admission */
#define ADMITTED assert(COMMITTED <= grant)

/* With -DSTALE_GRANTS each writer decides from a grant cache of its own,
 * and the bucket records a limit (blimit): the leader's writes (the
 * observer's Observe and the grant controller's Refresh, here the observer)
 * record its cache's; a reserving write decides by the lower of its
 * cache's and the recorded one, and records none (ledger.limitIn). LIMIT
 * then reads: a synchronous admission honours a lowered grant once the
 * bucket records it or the deciding writer's cache has it; an admission
 * inside a lease, which reads no bucket, once the replica's cache has it.
 * Before that, the old grant: the window a change takes to reach anyone.
 * BUG_LIMIT_FROM_CACHE is the ledger before the fence: every writer
 * decides by, and records, its own cache's limit. */
#ifdef STALE_GRANTS
byte blimit = LIMIT0;
bit bknown;             /* ghost: the bucket has recorded the lowered grant */
#define RECORD_OBS blimit = VIEW(OBS); bknown = bknown || (lowered && blimit == grant)
#ifdef BUG_LIMIT_FROM_CACHE
#define EFF(w) VIEW(w)
#define RECORD(w) blimit = VIEW(w); bknown = bknown || (lowered && blimit == grant)
#else
#define EFF(w) ((blimit < VIEW(w)) -> blimit : VIEW(w))
#define RECORD(w) skip
#endif
#define ADMITTED_SYNC(w) assert(COMMITTED <= ((bknown || VIEW(w) == grant) -> grant : LIMIT0))
#define ADMITTED_LEASED(w) assert(COMMITTED <= ((VIEW(w) == grant) -> grant : LIMIT0))
#else
#define RECORD_OBS skip
#define EFF(w) VIEW(w)
#define RECORD(w) skip
#define ADMITTED_SYNC(w) ADMITTED
#define ADMITTED_LEASED(w) ADMITTED
#endif

/* the bucket as a write left it: the conformance test compares the real
 * ledger's bucket with this line after every write */
inline printBucket() {
	printf("QK bucket allocated=%d reservations=", alloc);
	for (ix : 0 .. NOBJ - 1) { printf("%d,", res[ix]) }
	printf(" growths=");
	for (ix : 0 .. NOBJ - 1) { printf("%d,", gres[ix]) }
	printf(" sums=");
	for (ix : 0 .. NSUM - 1) { printf("%d,", sumAmt[ix]) }
	printf(" leases=%d,%d,\n", lease[0], lease[1])
}

/* the reserving write's compaction: above COMPACT create reservations,
 * every one but the one just written (keep) goes into one new sum */
inline compact(keep) {
	acc = 0;
	for (ix : 0 .. NOBJ - 1) { if :: res[ix] > 0 -> acc++ :: else fi }
	if
	:: acc > COMPACT ->
		acc = 0;
		for (ix : 0 .. NOBJ - 1) {
			if
			:: ix != keep && res[ix] > 0 -> acc = acc + res[ix]; res[ix] = 0
			:: else
			fi
		}
		assert(nsum < NSUM);
		sumAmt[nsum] = acc; sumWait[nsum] = (rebuilding -> UNSEEN : BARRIER); nsum++;
		printf("QK compact sum=%d amount=%d\n", nsum - 1, acc)
	:: else
	fi
}

/* Observe's write: allocated from the tally, and every reservation the
 * tally now accounts for folded, with the limit from the writer's grants */
inline observe() {
	alloc = TALLY;
	RECORD_OBS;
	for (ix : 0 .. NOBJ - 1) {
		if :: seenAmt[ix] > 0 -> printf("QK counted obj=%d generation=%d amount=%d\n", ix, seenGen[ix], seenAmt[ix]) :: else fi
	}
	for (ix : 0 .. NOBJ - 1) {
		if :: FOLDS_CREATE(ix) -> res[ix] = 0 :: else fi;
		if :: gres[ix] > 0 && FOLDS_GROWTH(ix) -> gres[ix] = 0 :: else fi
	}
}

/* ------------------------------------------------------------------ world */

/* a growing update (1 -> 2) of o, its growth reserved with its total;
 * even objects have a generation, which the update bumps */
#define GROW(o) \
	:: atomic { now < MAXT && ost[o] == LIVE && !grown[o] && upd[o] == 0 -> \
		grown[o] = 1; \
		if \
		:: alloc + RESERVED + 1 <= EFF(WORLD) -> \
			gres[o] = 1; gtot[o] = 2; gttl[o] = TTL; \
			ggen[o] = ogen[o] + (1 - o % 2); \
			upd[o] = 2; udl[o] = DEADLINE; \
			RECORD(WORLD); \
			printf("QK grow obj=%d generation=%d amount=1 total=2 granted=1 t=%d\n", o, ggen[o], now); \
			printBucket(); \
			ADMITTED_SYNC(WORLD) \
		:: else -> \
			printf("QK grow obj=%d generation=%d amount=1 total=2 granted=0 t=%d\n", o, ogen[o] + (1 - o % 2), now) \
		fi }

/* the API server stores an admitted create, or a later webhook refuses it */
#define STORE(o) \
	:: atomic { ost[o] == INFL -> \
		if \
		:: ost[o] = LIVE; printf("QK stored obj=%d\n", o) \
		:: ost[o] = GONE; oamt[o] = 0; printf("QK never obj=%d\n", o) \
		fi; \
		oev[o]++ }

#define STORE_UPDATE(o) \
	:: atomic { upd[o] > 0 -> \
		if \
		:: ost[o] == LIVE -> oamt[o] = upd[o]; ogen[o] = ogen[o] + (1 - o % 2); \
			oev[o]++; printf("QK updated obj=%d amount=%d\n", o, oamt[o]) \
		:: printf("QK update-refused obj=%d\n", o) \
		fi; \
		upd[o] = 0 }

/* a tenant deletes it, or shrinks what grew */
#define DELETE(o) \
	:: atomic { now < MAXT && ost[o] == LIVE && upd[o] == 0 -> \
		ost[o] = GONE; oamt[o] = 0; oev[o]++; printf("QK delete obj=%d\n", o) }
#define SHRINK(o) \
	:: atomic { now < MAXT && ost[o] == LIVE && oamt[o] == 2 && upd[o] == 0 -> \
		oamt[o] = 1; ogen[o] = ogen[o] + (1 - o % 2); oev[o]++; printf("QK shrink obj=%d\n", o) }

/* the clock stops before a request in flight reaches its deadline (a
 * request admitted at t is stored or refused while now < t + DEADLINE), and
 * until the observer has delivered every event, seen every sum and taken
 * every lapsed lease (it lags by less than a tick, far less than a TTL) */
#ifdef SLOW_OBSERVER
#define TICK_OK(o) ((ost[o] != INFL || odl[o] > 1) && (upd[o] == 0 || udl[o] > 1))
#else
#define TICK_OK(o) ((ost[o] != INFL || odl[o] > 1) && (upd[o] == 0 || udl[o] > 1) && \
	(rebuilding || seenEv[o] == oev[o]))
#endif
/* past MAXT the clock runs only while a timer does */
#define TIMING_OBJ(o) ((res[o] > 0 && rttl[o] > 0) || (gres[o] > 0 && gttl[o] > 0))
#define TIMING_SUM(s) (sumAmt[s] > 0 && sumWait[s] > 0 && sumWait[s] != UNSEEN)
#define TIMING (ANY_OBJ(TIMING_OBJ) || ANY_SUM(TIMING_SUM) || (lease[0] > 0 && lttl[0] > 0) || (lease[1] > 0 && lttl[1] > 0))

/* a tick: every timer runs down; one that no longer times anything is
 * cleared, so states that differ only there are one */
inline tick() {
	if :: now < MAXT -> now++ :: else fi;
	for (ix : 0 .. NOBJ - 1) {
		rttl[ix] = ((res[ix] > 0 && rttl[ix] > 0) -> rttl[ix] - 1 : 0);
		gttl[ix] = ((gres[ix] > 0 && gttl[ix] > 0) -> gttl[ix] - 1 : 0);
		odl[ix] = ((ost[ix] == INFL) -> odl[ix] - 1 : 0);
		udl[ix] = ((upd[ix] > 0) -> udl[ix] - 1 : 0)
	}
	for (ix : 0 .. NSUM - 1) {
		sumWait[ix] = ((sumAmt[ix] > 0 && sumWait[ix] > 0 && sumWait[ix] != UNSEEN) -> sumWait[ix] - 1 : sumWait[ix])
	}
	for (ix : 0 .. NREP - 1) {
		lttl[ix] = ((lease[ix] > 0 && lttl[ix] > 0) -> lttl[ix] - 1 : 0);
		/* the observer takes a lapsed lease as it lapses: a sum, seen now,
		 * freed behind the barrier */
		if
#ifdef BUG_LEASE_NO_BARRIER
		:: lease[ix] > 0 && lttl[ix] == 0 ->
			lease[ix] = 0; printf("QK lease-lapsed r=%d freed\n", ix)
#endif
		:: lease[ix] > 0 && lttl[ix] == 0 ->
			assert(nsum < NSUM);
			sumAmt[nsum] = lease[ix]; sumWait[nsum] = BARRIER; nsum++; lease[ix] = 0;
			printf("QK lease-lapsed r=%d sum=%d\n", ix, nsum - 1);
			printBucket()
		:: else
		fi
	}
}

active proctype world() {
	byte o;
	do
	/* a create, reserved synchronously by a replica: CAS on the bucket */
	:: atomic { now < MAXT && next < NOBJ ->
		o = next; next++;
		if
		:: alloc + RESERVED + 1 <= EFF(WORLD) ->
			res[o] = 1; rttl[o] = TTL;
			ost[o] = INFL; oamt[o] = 1; odl[o] = DEADLINE;
			RECORD(WORLD);
			printf("QK reserve obj=%d amount=1 granted=1 t=%d\n", o, now);
			compact(o);
			printBucket();
			ADMITTED_SYNC(WORLD)
		:: else ->
			ost[o] = GONE;
			printf("QK reserve obj=%d amount=1 granted=0 t=%d\n", o, now)
		fi }
#ifndef NOGROW
	EACH_GROWN(GROW)
	EACH_GROWN(STORE_UPDATE)
	EACH_GROWN(SHRINK)
#endif
	EACH_OBJ(STORE)
	EACH_OBJ(DELETE)
	/* the one grant change */
	:: atomic { now < MAXT && !lowered -> lowered = 1; grant = LIMIT1; printf("QK grant limit=%d\n", grant) }
#ifdef STALE_GRANTS
	:: atomic { lowered && gview[0] != grant -> gview[0] = grant; printf("QK cache w=0 limit=%d\n", grant) }
	:: atomic { lowered && gview[1] != grant -> gview[1] = grant; printf("QK cache w=1 limit=%d\n", grant) }
	:: atomic { lowered && gview[2] != grant -> gview[2] = grant; printf("QK cache w=2 limit=%d\n", grant) }
	:: atomic { lowered && gview[3] != grant -> gview[3] = grant; printf("QK cache w=3 limit=%d\n", grant) }
#endif
	:: atomic { (now < MAXT || TIMING) && ALL_OBJ(TICK_OK) && !rebuilding ->
		tick(); printf("QK tick t=%d\n", now) }
	:: timeout -> break
	od;
	/* quiescence: everything settled */
	printf("QK settled allocated=%d live=%d reserved=%d\n", alloc, LIVEUSE, RESERVED);
	assert(alloc == LIVEUSE && RESERVED == 0)
}

/* -------------------------------------------------------------- replicas */

proctype replica(byte r) {
	byte o;
	do
	/* take a lease: a share of the headroom, none below the floor */
	:: atomic { now < MAXT && !held[r] && lease[r] == 0 && !(crashed && r == 0) &&
		alloc + RESERVED + LFLOOR <= EFF(r) ->
		lease[r] = 1; lttl[r] = LTTL + SKEW;
		held[r] = 1; rem[r] = 1; llim[r] = EFF(r);
		RECORD(r);
		printf("QK lease-take r=%d amount=1 t=%d\n", r, now);
		printBucket() }
	/* admit a create inside it, no write: not once it could have lapsed,
	 * nor under a limit lowered since it was sized */
	:: atomic { held[r] && rem[r] >= 1 && lttl[r] > SKEW + 1 && VIEW(r) >= llim[r] && next < NOBJ && now < MAXT ->
		o = next; next++;
		rem[r]--; unrec[r] = unrec[r] | (1 << o);
		ost[o] = INFL; oamt[o] = 1; odl[o] = DEADLINE;
		printf("QK lease-admit r=%d obj=%d t=%d\n", r, o, now);
		ADMITTED_LEASED(r) }
	/* record what it admitted as reservations, renewing the lease (or, once
	 * it may have lapsed or the replica shuts down, giving it back), in one
	 * write: when it admitted something, when the lease is due for renewal,
	 * and at shutdown */
	:: atomic { held[r] && (unrec[r] != 0 || lttl[r] <= SKEW + 2 || now >= MAXT) ->
		for (ix : 0 .. NOBJ - 1) {
			if
			:: unrec[r] & (1 << ix) -> res[ix] = 1; rttl[ix] = TTL
			:: else
			fi
		}
		unrec[r] = 0;
		RECORD(r);
		if
		:: lttl[r] > SKEW + 1 && now < MAXT ->
			lease[r] = rem[r]; lttl[r] = LTTL + SKEW;
			printf("QK lease-record r=%d amount=%d t=%d\n", r, rem[r], now)
		:: else ->
			lease[r] = 0; lttl[r] = 0; held[r] = 0; rem[r] = 0;
			printf("QK lease-return r=%d t=%d\n", r, now)
		fi;
		printBucket() }
	/* replica 0 is killed once: what it admitted and did not record is
	 * inside the lease it leaves */
	:: atomic { r == 0 && held[r] && !crashed ->
		crashed = 1; held[r] = 0; rem[r] = 0; unrec[r] = 0;
		printf("QK crash r=%d t=%d\n", r, now) }
	:: timeout && !held[r] -> break
	od
}

/* -------------------------------------------------------------- observer */

/* deliver an object's newest state */
#define DELIVER(o) \
	:: atomic { !rebuilding && seenEv[o] != oev[o] -> \
		seenEv[o] = oev[o]; seenGen[o] = ogen[o]; \
		seenAmt[o] = ((ost[o] == LIVE) -> oamt[o] : 0) }

/* expire a create reservation past its TTL whose object a live read finds
 * absent; a growth past its TTL whose object the observer evaluated at its
 * generation and does not count at its total, or a live read finds absent
 * or short of the generation (counting.PlanReservations, Expired) */
#ifdef BUG_EXPIRE_EARLY
#define EXPIRABLE(o) (res[o] > 0 && ost[o] != LIVE)
#else
#define EXPIRABLE(o) (res[o] > 0 && rttl[o] == 0 && ost[o] != LIVE)
#endif
#define EXPIRE(o) \
	:: atomic { !rebuilding && EXPIRABLE(o) -> res[o] = 0; printf("QK expire obj=%d t=%d\n", o, now); printBucket() } \
	:: atomic { !rebuilding && gres[o] > 0 && gttl[o] == 0 && \
		((seenEv[o] > 0 && seenGen[o] >= ggen[o] && seenAmt[o] < gtot[o]) || ost[o] != LIVE || ogen[o] < ggen[o]) -> \
		gres[o] = 0; printf("QK expire-growth obj=%d t=%d\n", o, now); printBucket() }

/* while it rebuilds: FoldCreated, each create reservation whose object a
 * live read finds, added to allocated as last written */
#define FOLD_CREATED(o) \
	:: atomic { rebuilding && res[o] > 0 && ost[o] == LIVE -> \
		alloc = alloc + oamt[o]; res[o] = 0; \
		printf("QK fold-created obj=%d amount=%d t=%d\n", o, oamt[o], now); printBucket() }

#ifdef BUG_FREE_BEFORE_BARRIER
#define ELIGIBLE(s) (sumAmt[s] > 0 && sumWait[s] != UNSEEN)
#else
#define ELIGIBLE(s) (sumAmt[s] > 0 && sumWait[s] == 0)
#endif
#define DELIVERED_R(o) (seenEv[o] >= evR[o])

active proctype observer() {
	byte s;
	do
	EACH_OBJ(DELIVER)
	:: atomic { !rebuilding && (alloc != TALLY || ANY_OBJ(FOLDABLE)) ->
		observe(); printf("QK observe allocated=%d t=%d\n", alloc, now); printBucket() }
	EACH_OBJ(EXPIRE)
#ifdef STALE_GRANTS
	/* the grant controller's Refresh: the leader records its cache's limit */
	:: atomic { blimit != VIEW(OBS) -> RECORD_OBS; printf("QK refresh limit=%d\n", blimit) }
#endif
	/* the barrier: once BARRIER has passed since a sum was first seen, read
	 * the cluster's revision ... */
	:: atomic { !rebuilding && !barOn && ANY_SUM(ELIGIBLE) ->
		barSet = 0;
		for (s : 0 .. NSUM - 1) { if :: ELIGIBLE(s) -> barSet = barSet | (1 << s) :: else fi }
		barOn = 1;
		for (ix : 0 .. NOBJ - 1) { evR[ix] = oev[ix] } }
	/* ... and free them in the first write whose tally has every event up
	 * to it */
	:: atomic { !rebuilding && barOn && ALL_OBJ(DELIVERED_R) ->
		observe();
		for (s : 0 .. NSUM - 1) {
			if :: barSet & (1 << s) -> printf("QK free sum=%d amount=%d t=%d\n", s, sumAmt[s], now); sumAmt[s] = 0; sumWait[s] = UNSEEN :: else fi
		}
		barOn = 0; barSet = 0;
		for (ix : 0 .. NOBJ - 1) { evR[ix] = 0 }
		printf("QK observe allocated=%d t=%d\n", alloc, now);
		printBucket() }
	/* the manager restarts: the tally, what it had seen and the barrier are
	 * gone */
#ifndef NORESTART
	:: atomic { !restarted && now < MAXT ->
		restarted = 1; rebuilding = 1; barOn = 0; barSet = 0;
		for (ix : 0 .. NOBJ - 1) { seenAmt[ix] = 0; seenEv[ix] = 0; seenGen[ix] = 0; evR[ix] = 0 }
		for (ix : 0 .. NSUM - 1) { sumWait[ix] = UNSEEN }
		printf("QK restart t=%d\n", now) }
#endif
	EACH_OBJ(FOLD_CREATED)
	/* the rebuild's list: every object as it is now */
	:: atomic { rebuilding ->
		for (ix : 0 .. NOBJ - 1) {
			seenEv[ix] = oev[ix]; seenGen[ix] = ogen[ix];
			seenAmt[ix] = ((ost[ix] == LIVE) -> oamt[ix] : 0)
		}
		for (ix : 0 .. NSUM - 1) { if :: sumAmt[ix] > 0 -> sumWait[ix] = BARRIER :: else fi }
		rebuilding = 0; printf("QK rebuilt t=%d\n", now) }
	:: timeout -> break
	od
}

/* COVER, at every state */
active proctype monitor() {
end:
	atomic { !COVER -> printf("QK cover allocated=%d reserved=%d committed=%d\n", alloc, RESERVED, COMMITTED); assert(false) }
}

/* -DNOLEASES: no replica takes a lease (the conformance test's traces: the
 * ledger's lease rounds run on its own clock, not a caller's) */
#ifndef LEASERS
#define LEASERS 2       /* replicas that take leases: 0, 1 or 2 */
#endif
init {
	atomic {
#ifndef NOLEASES
		if :: LEASERS > 0 -> run replica(0) :: else fi;
		if :: LEASERS > 1 -> run replica(1) :: else fi
#else
		skip
#endif
	}
}
