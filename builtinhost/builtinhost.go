// Package builtinhost gives the quota builtins of one process what they
// decide admissions with: the ledger over AllowanceBucket status (once its
// grant mirror has synced), the registrations' units their denials show,
// the policy versions the observer has counted (package counted), and the
// ClaimCreationPolicies quota.policy_claim renders, each from an informer
// of the process's controller-runtime manager. Two processes host the
// builtins for admission: Gatekeeper built with the plugin (package
// plugin), and the quotakeeper manager when it serves the External Data
// provider (package externaldata) for a stock Gatekeeper. Both load them
// here, so both decide alike.
package builtinhost

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/quotakeeper/quotakeeper/builtins"
	"github.com/quotakeeper/quotakeeper/claimpolicies"
	"github.com/quotakeeper/quotakeeper/grants"
	"github.com/quotakeeper/quotakeeper/ledger"
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

// Setup adds to mgr what hands the builtins l (whose grant mirror is m)
// once m has synced, and policies (from ClaimPolicies) once they have;
// and the units and counted versions read from systemNamespace. Until
// then the builtins halt, so admission fails closed rather than deciding
// against limits computed from grants not yet seen, or without a policy.
func Setup(mgr manager.Manager, l *ledger.Ledger, m *grants.Mirror, policies *claimpolicies.Set, systemNamespace string) error {
	units := newRegistrationUnits()
	if err := units.register(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	builtins.UseUnits(units)
	// The constraints the manager has counted under (package counted):
	// quota.reserve denies the others from the first request on.
	record := &countedRecord{}
	builtins.UseCountedPolicies(record)
	informer, err := newCountedInformer(mgr, systemNamespace, record)
	if err != nil {
		return err
	}
	if err := mgr.Add(informer); err != nil {
		return fmt.Errorf("counted policies: %w", err)
	}
	return mgr.Add(useWhenSynced{ledger: l, mirror: m, policies: policies})
}

// useWhenSynced hands the ledger and the policies to the builtins once
// their informers have synced.
type useWhenSynced struct {
	ledger   *ledger.Ledger
	mirror   *grants.Mirror
	policies *claimpolicies.Set
}

func (u useWhenSynced) Start(ctx context.Context) error {
	if err := grants.WaitForSync(ctx, u.mirror); err != nil {
		return nil // shutting down before the mirror synced
	}
	builtins.Use(u.ledger)
	defer builtins.Use(nil)
	if !toolscache.WaitForCacheSync(ctx.Done(), u.policies.HasSynced) {
		return nil // shutting down
	}
	builtins.UseClaimPolicies(u.policies)
	defer builtins.UseClaimPolicies(nil)
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: every replica answers admission requests.
func (useWhenSynced) NeedLeaderElection() bool { return false }
