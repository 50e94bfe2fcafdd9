package plugin

// Readable failures. A quota builtin that cannot decide halts, so that the
// request is denied (a plain error would leave the call undefined and
// admit). Gatekeeper's frameworks driver makes the halt's text the
// violation's message as OPA prints it:
//   [configmaps] libs["lib_0"]:612: eval_builtin_error: quota.reserve: quota is not ready: ...
// Rego cannot catch a halt and the builtin cannot print it otherwise
// (rego.RegisterBuiltin adds the location and the code), so the plugin
// rewrites the response the API server gets, the one place that sees it:
// each such line becomes builtins.UndecidedMessage of the builtin's own
// words, the same message the External Data twins give in the stock mode.

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

// ReadableFailures wraps Gatekeeper's validation handler (see above).
type ReadableFailures struct {
	admission.Handler
}

func (h ReadableFailures) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := h.Handler.Handle(ctx, req)
	if resp.Result != nil {
		resp.Result.Message = builtins.Undecided(resp.Result.Message)
	}
	for i, w := range resp.Warnings {
		resp.Warnings[i] = builtins.Undecided(w)
	}
	return resp
}
