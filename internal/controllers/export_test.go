package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// LedgerClaim exposes ledgerClaim to the external tests.
var LedgerClaim = ledgerClaim

// ReconcileEffective runs one refresh of the effective grants of a consumer
// and resource type with c as the controller's client.
func ReconcileEffective(ctx context.Context, c client.Client, consumer ledger.Consumer, resourceType string) (reconcile.Result, error) {
	r := &effectiveReconciler{client: c, refresh: DefaultEffectiveRefresh}
	return r.Reconcile(ctx, pair{consumer, resourceType})
}

// ReconcileClaim runs one reconcile of the claim controller with c as its
// client and m as its grant mirror.
func ReconcileClaim(ctx context.Context, c client.Client, m *grants.Mirror, req reconcile.Request) (reconcile.Result, error) {
	r := &claimReconciler{client: c, mirror: m}
	return r.Reconcile(ctx, req)
}
