// Package builtinhost builds what the quota builtins of one process decide
// admissions against (a builtins.Env): the ledger over AllowanceBucket
// status (once its grant mirror has synced), the registrations' units their
// denials show, the policy versions the observer has counted (package
// counted), the ClaimCreationPolicies quota.policy_claim renders and the
// deadline of a reservation, each from an informer of the process's
// controller-runtime manager. Two processes host the builtins for
// admission: Gatekeeper built with the plugin (package plugin), and the
// quotakeeper manager when it serves the External Data provider (package
// externaldata) for a stock Gatekeeper. Both build their Env here, so both
// decide alike.
package builtinhost

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/claimpolicies"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// ClaimPolicies returns the ClaimCreationPolicies of systemNamespace's
// quota, watched from mgr's cache: the set Setup hands the builtins, which
// a process that renders policies elsewhere too (the manager's observer)
// shares, so that one process never holds two views of them.
func ClaimPolicies(mgr manager.Manager, systemNamespace string) (*claimpolicies.Set, error) {
	policies := claimpolicies.NewSet()
	policies.SetSystemNamespace(systemNamespace)
	if err := policies.Watch(context.Background(), mgr.GetCache(), mgr.GetCache()); err != nil {
		return nil, err
	}
	return policies, nil
}

// Options are what Setup hands the builtins.
type Options struct {
	// Ledger decides; Mirror is its grant mirror, which must have synced
	// before it may.
	Ledger *ledger.Ledger
	Mirror *grants.Mirror
	// ClaimPolicies, from ClaimPolicies, once synced.
	ClaimPolicies *claimpolicies.Set
	// SystemNamespace holds the counted policy versions' ConfigMap.
	SystemNamespace string
	// Deadline bounds each quota.reserve call.
	Deadline time.Duration
}

// Setup builds the builtins' Env and hands it over through env: at once
// the deadline, the units and the counted policy versions; the ledger once
// the grant mirror has synced, and the ClaimCreationPolicies once their
// informer has. Until then the builtins halt, so admission fails closed
// rather than deciding against limits computed from grants not yet seen,
// or without a policy.
func Setup(mgr manager.Manager, env *atomic.Pointer[builtins.Env], opts Options) error {
	units := newRegistrationUnits()
	if err := units.register(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	// The constraints the manager has counted under (package counted):
	// quota.reserve denies the others from the first request on.
	record := &countedRecord{}
	starting := &builtins.Env{Units: units, Counted: record, Deadline: opts.Deadline}
	env.Store(starting)
	informer, err := newCountedInformer(mgr, opts.SystemNamespace, record)
	if err != nil {
		return err
	}
	if err := mgr.Add(informer); err != nil {
		return fmt.Errorf("counted policies: %w", err)
	}
	return mgr.Add(useWhenSynced{env: env, starting: starting, ledger: opts.Ledger, mirror: opts.Mirror, policies: opts.ClaimPolicies})
}

// useWhenSynced hands the ledger and the policies to the builtins once
// their informers have synced, each time as a new Env (an Env is never
// changed once evaluations may read it), and takes them back on shutdown.
type useWhenSynced struct {
	env      *atomic.Pointer[builtins.Env]
	starting *builtins.Env // what the builtins have before
	ledger   *ledger.Ledger
	mirror   *grants.Mirror
	policies *claimpolicies.Set
}

func (u useWhenSynced) Start(ctx context.Context) error {
	if err := grants.WaitForSync(ctx, u.mirror); err != nil {
		return nil // shutting down before the mirror synced
	}
	withLedger := *u.starting
	withLedger.Ledger = u.ledger
	// Capacity leases (when the ledger has them on) are taken against the
	// synced grants only, and given back before Start returns, so a replica
	// shut down cleanly leaves none to lapse.
	leases := make(chan error, 1)
	go func() { leases <- u.ledger.RunLeases(ctx) }()
	defer func() {
		if err := <-leases; err != nil {
			klog.FromContext(ctx).Error(err, "giving capacity leases back failed; they hold their quota until they lapse and the manager frees them")
		}
	}()
	u.env.Store(&withLedger)
	defer u.env.Store(u.starting)
	if !toolscache.WaitForCacheSync(ctx.Done(), u.policies.HasSynced) {
		return nil // shutting down
	}
	ready := withLedger
	ready.ClaimPolicies = u.policies
	u.env.Store(&ready)
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: every replica answers admission requests.
func (useWhenSynced) NeedLeaderElection() bool { return false }

// LeaseHolder names this replica in the capacity leases it holds
// (ledger.WithLeases): its pod's name, the hostname, as a DNS label; the
// ledger adds the start time.
func LeaseHolder() string {
	name, _ := os.Hostname()
	name = strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name)), "-")
	if name == "" {
		return "replica"
	}
	return name[:min(len(name), 40)]
}
