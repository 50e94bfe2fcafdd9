package controllers

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Setup adds every controller to mgr, with their cache indexes, deciding
// with the process's ledger and grant mirror (opts.Ledger, opts.Mirror).
// Call it once per manager, before Start.
// Every controller is leader-elected (the manager's default): one replica
// decides at a time, although the ledger would stay exact with more.
func Setup(mgr ctrl.Manager, opts Options) error {
	opts.defaults()
	if opts.Ledger == nil || opts.Mirror == nil {
		return errors.New("controllers: no ledger or grant mirror (build them with grants.NewLedger)")
	}
	if err := setupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	l, m := opts.Ledger, opts.Mirror
	c := mgr.GetClient()
	now := func() metav1.Time { return metav1.NewTime(opts.Now()) }
	steps := []struct {
		name  string
		setup func(ctrl.Manager) error
	}{
		{"registration", (&registrationReconciler{client: c}).setup},
		{"grant", (&grantReconciler{client: c, systemNamespace: opts.SystemNamespace}).setup},
		{"bucket", (&bucketReconciler{client: c, ledger: l, mirror: m, systemNamespace: opts.SystemNamespace}).setup},
		{"claim", (&claimReconciler{client: c, ledger: l, mirror: m, systemNamespace: opts.SystemNamespace,
			concurrency: opts.ClaimConcurrency, now: now}).setup},
		{"effective", (&effectiveReconciler{client: c, refresh: opts.EffectiveRefresh}).setup},
		{"grant creation policy", (&policyReconciler{client: c, mapper: mgr.GetRESTMapper(), kind: grantPolicyKind}).setup},
		{"claim creation policy", (&policyReconciler{client: c, mapper: mgr.GetRESTMapper(), kind: claimPolicyKind}).setup},
		{"claim creation policy constraint", (&claimPolicyReconciler{client: c, cache: mgr.GetCache()}).setup},
		{"grant creation", (&grantPolicyReconciler{client: c, systemNamespace: opts.SystemNamespace}).setup},
		{"quota bypass", (&bypassReconciler{client: c, now: opts.Now}).setup},
		{"delegation", (&delegationReconciler{client: c, live: mgr.GetAPIReader(), ledger: l, mirror: m, now: opts.Now,
			systemNamespace: opts.SystemNamespace}).setup},
	}
	for _, s := range steps {
		if err := s.setup(mgr); err != nil {
			return fmt.Errorf("%s controller: %w", s.name, err)
		}
	}
	return nil
}
