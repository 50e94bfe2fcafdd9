package controllers

import (
	"time"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/ledger"
)

// Options configure the controllers.
type Options struct {
	// SystemNamespace holds the buckets and grants of consumers that are
	// neither a namespace nor inside one. Default v1alpha1.DefaultSystemNamespace.
	SystemNamespace string
	// ReservationTTL is the lifetime of the reservations the claim
	// controller makes for the Allocation claims it grants. The observer
	// folds one as soon as it counts the Granted claim, and never expires
	// one whose claim still exists, so the TTL only matters for a claim
	// deleted before it was counted (Release removes that one anyway).
	// Default ledger.DefaultReservationTTL.
	ReservationTTL time.Duration
	// ClaimConcurrency is how many claims are decided at once. Default 4.
	ClaimConcurrency int
	// Now is the clock expiry is judged by. Default time.Now.
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
	if o.ReservationTTL <= 0 {
		o.ReservationTTL = ledger.DefaultReservationTTL
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
