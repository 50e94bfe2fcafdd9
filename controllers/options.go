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
	// ReservationTTL is the lifetime of reservations this process makes
	// through its ledger. The controllers make none: reservations are made
	// at admission (inside Gatekeeper) and expire at the expiresAt written
	// into the bucket then. Default ledger.DefaultReservationTTL.
	ReservationTTL time.Duration
	// ObjectPollInterval bounds how long the realization controller waits
	// before looking again for the object of a reservation whose kind it
	// does not watch (not among any registration's claimingResources).
	// Default 5s.
	ObjectPollInterval time.Duration
	// ClaimConcurrency is how many claims are decided at once. Default 4.
	ClaimConcurrency int
	// Now is the clock expiry is judged by. Default time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.SystemNamespace == "" {
		o.SystemNamespace = quotav1alpha1.DefaultSystemNamespace
	}
	if o.ReservationTTL <= 0 {
		o.ReservationTTL = ledger.DefaultReservationTTL
	}
	if o.ObjectPollInterval <= 0 {
		o.ObjectPollInterval = 5 * time.Second
	}
	if o.ClaimConcurrency <= 0 {
		o.ClaimConcurrency = 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}
