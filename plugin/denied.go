package plugin

// Reservations of denied reviews, given back at once.
//
// A quota constraint's quota.reserve holds quota while Gatekeeper still
// evaluates the request's other constraints; when one of them denies, the
// object is never created, and its reservation held shared quota until its
// TTL (seen: reserved 1 left on a namespace's ConfigMap bucket after a
// create another quota constraint denied). ReleaseOnDenial wraps the whole
// validation handler, the bypass auditor included (it can turn an admission
// into a denial), so it sees the response the API server gets: if that is
// a denial, every reservation the review's quota.reserve calls added is
// undone before the response goes out, and a retry sees the quota free.
//
// Warn and dryrun constraints do not deny, so their reservations stay, as
// the object they admit will be counted. Dry-run requests reserve nothing.
// What the webhook cannot see stays for the TTL: a request a later webhook
// denies, or one the API server refuses after admission (AlreadyExists).

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

// releaseTimeout bounds the release of a denied review's reservations: one
// bucket write each, normally milliseconds. The denial goes out after it, so
// it must leave the review most of the webhook's timeout (10s in
// quotakeeper's Gatekeeper values). What it cannot release in time expires.
const releaseTimeout = 2 * time.Second

// ReleaseOnDenial wraps Gatekeeper's validation handler (see above).
type ReleaseOnDenial struct {
	admission.Handler
	// Timeout bounds the release; 0 means releaseTimeout.
	Timeout time.Duration
}

func (h *ReleaseOnDenial) Handle(ctx context.Context, req admission.Request) admission.Response {
	var taken builtins.Reservations
	resp := h.Handler.Handle(builtins.WithReservations(ctx, &taken), req)
	if resp.Allowed || taken.Len() == 0 {
		return resp
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = releaseTimeout
	}
	// The API server may have stopped waiting; the quota is given back all
	// the same.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	n := taken.Len()
	if err := taken.Release(rctx); err != nil {
		log.FromContext(ctx).WithName("quotakeeper").Error(err, "reservations of a denied request not released; they expire at their TTL",
			"uid", req.UID, "operation", req.Operation, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "calls", n)
	}
	return resp
}
