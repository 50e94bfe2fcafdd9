package controllers

import (
	"time"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/grants"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Options configure the controllers.
type Options struct {
	// SystemNamespace holds the buckets and grants of consumers that are
	// neither a namespace nor inside one. Default v1alpha1.DefaultSystemNamespace.
	SystemNamespace string
	// Ledger is the process's one ledger (grants.NewLedger, built in main),
	// which the claim controller reserves in for the Allocation claims it
	// grants and the bucket controller refreshes; its ReservationTTL is
	// theirs. Required.
	Ledger *ledger.Ledger
	// Mirror is Ledger's grant source: the bucket and claim controllers
	// decide nothing before it has synced, and follow its changes. Required.
	Mirror *grants.Mirror
	// ClaimConcurrency is how many claims are decided at once. Default 4.
	ClaimConcurrency int
	// Now is the clock the claim and bypass controllers read (Ledger has
	// its own). Default time.Now.
	Now func() time.Time
	// EffectiveRefresh is the least time between two refreshes of a
	// consumer's EffectiveResourceGrants caused by usage alone. Default
	// DefaultEffectiveRefresh.
	EffectiveRefresh time.Duration
}

// DefaultEffectiveRefresh is Options.EffectiveRefresh's default, and the
// manager's --effective-grant-refresh.
const DefaultEffectiveRefresh = 5 * time.Second

func (o *Options) defaults() {
	if o.SystemNamespace == "" {
		o.SystemNamespace = quotav1alpha1.DefaultSystemNamespace
	}
	if o.ClaimConcurrency <= 0 {
		o.ClaimConcurrency = 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.EffectiveRefresh <= 0 {
		o.EffectiveRefresh = DefaultEffectiveRefresh
	}
}
