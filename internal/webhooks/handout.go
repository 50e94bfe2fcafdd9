package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/delegation"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// HandOut decides delegated grants against their parents' caps through the
// process's one ledger: a create's amounts, or an update's growth, are
// reserved all or nothing in the parents' delegation buckets (package
// delegation), where the delegation controller later folds them into what
// it counts. A lowering reserves nothing and is always admitted.
type HandOut struct {
	Ledger *ledger.Ledger
	// Synced reports whether the ledger's grant mirror has its initial
	// list: before, every cap reads 0 (or too little), so nothing is
	// decided.
	Synced func() bool
	// Reader lists the live delegated grants a refusal names.
	Reader client.Reader
}

var grantsResource = quotav1alpha1.GroupVersion.WithResource("resourcegrants").GroupResource()

// admit reserves what g hands out beyond old (nil for a create). A dry
// run is judged against the buckets as they stand and holds nothing.
func (h *HandOut) admit(ctx context.Context, old, g *quotav1alpha1.ResourceGrant) error {
	claim, ok, err := delegation.Claim(old, g)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if !ok {
		return nil
	}
	if h == nil || h.Ledger == nil {
		return apierrors.NewForbidden(grantsResource, g.Name, errNoHandOut)
	}
	if h.Synced != nil && !h.Synced() {
		return apierrors.NewServiceUnavailable("the manager is still reading the ResourceGrants that make up the caps; retry in a few seconds")
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var d ledger.Decision
	if req.DryRun != nil && *req.DryRun {
		d, err = h.peek(ctx, claim)
	} else {
		d, err = h.Ledger.Reserve(ctx, claim)
	}
	if err != nil {
		// Fail closed: a hand-out that cannot be decided is not admitted.
		return apierrors.NewInternalError(fmt.Errorf("handing out %s: %w", g.Namespace+"/"+g.Name, err))
	}
	if d.Granted {
		return nil
	}
	return apierrors.NewForbidden(grantsResource, g.Name, errors.New(h.denial(ctx, g, d)))
}

// peek decides a dry run: every request must fit its bucket as it stands.
func (h *HandOut) peek(ctx context.Context, claim ledger.Claim) (ledger.Decision, error) {
	d := ledger.Decision{Granted: true}
	for _, r := range claim.Requests {
		key := ledger.NewBucketKey(r.Consumer, r.ResourceType, nil)
		u, err := h.Ledger.Usage(ctx, key)
		if err != nil {
			return ledger.Decision{}, err
		}
		rd := ledger.RequestDecision{Request: r, Bucket: key.Name(), Granted: true, Reason: ledger.ReasonQuotaAvailable,
			Limit: u.Limit, Allocated: u.Allocated, Reserved: u.Reserved, Available: u.Available}
		if r.Amount > u.Available {
			d.Granted, rd.Granted, rd.Reason = false, false, ledger.ReasonQuotaExceeded
		}
		d.Requests = append(d.Requests, rd)
	}
	if !d.Granted {
		for i := range d.Requests {
			d.Requests[i].Granted = false
		}
	}
	return d, nil
}

// denial names, for every refused resource type, the cap, what is handed
// out and to whom (the live delegated grants this process's cache holds),
// and what was asked.
func (h *HandOut) denial(ctx context.Context, g *quotav1alpha1.ResourceGrant, d ledger.Decision) string {
	var tally delegation.Tally
	var all quotav1alpha1.ResourceGrantList
	if h.Reader != nil && h.Reader.List(ctx, &all) == nil {
		tally, _ = delegation.Count(all.Items)
	}
	var msgs []string
	for _, rd := range d.Requests {
		if rd.Reason != ledger.ReasonQuotaExceeded {
			continue
		}
		key := ledger.NewBucketKey(rd.Request.Consumer, rd.Request.ResourceType, nil)
		msgs = append(msgs, delegation.Denial(rd.Request.Consumer, ledgerconv.Consumer(g.Spec.ConsumerRef), rd, tally[key]))
	}
	return strings.Join(msgs, "; ")
}
