// Package externaldata is quotakeeper's External Data provider: the HTTPS
// endpoint a stock Gatekeeper calls from the quota templates' twins
// (templates/<name>/template-externaldata.yaml) through its external_data
// builtin, so that quotakeeper runs on a Gatekeeper it did not build. It
// answers each key by calling the quota builtin the key names
// (builtins.Call) against the Env the hosting process builds (package
// builtinhost: the ledger, units, counted policy versions, claim
// policies): the same code and the same ledger as the builtins linked into
// Gatekeeper, so the same decisions and messages. Any number of manager replicas may answer at
// once; the AllowanceBucket's compare-and-swap is the only lock, as for
// Gatekeeper's replicas.
//
// It is separate from the builtins because it is a server: Gatekeeper's
// provider protocol (ProviderRequest in, ProviderResponse out, from the
// frameworks' externaldata package), TLS with the manager's certificate,
// and optionally the client certificate Gatekeeper presents.
package externaldata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	frameworks "github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// Path is where the provider answers; the Provider object's spec.url ends
// with it.
const Path = "/v1/quota"

// apiVersion is the provider protocol's version (Gatekeeper's
// externaldata.gatekeeper.sh/v1beta1).
const apiVersion = "externaldata.gatekeeper.sh/v1beta1"

// maxRequestBytes bounds a request body: a key carries one claim, a pod
// template at most; Gatekeeper batches the keys of one external_data call.
const maxRequestBytes = 8 << 20

// Key is what one key of a ProviderRequest holds, as JSON: the builtin to
// call, its arguments, and the admission request's uid for a builtin whose
// answer depends on state (rego.ExternalDataLib writes it), which makes
// the key, and so Gatekeeper's cached answer, that request's alone.
type Key struct {
	Builtin string `json:"builtin"`
	Args    []any  `json:"args"`
	Request string `json:"request"`
}

// Handler answers Gatekeeper's provider requests.
type Handler struct {
	// Env is what the builtins decide against, read for each request
	// (nil: every stateful call halts as not ready).
	Env func() *builtins.Env
	// RequireClientCertificate refuses a request whose connection did not
	// present a client certificate the server verified (mTLS: the server's
	// tls.Config decides which CAs it trusts).
	RequireClientCertificate bool
	// ClientNames, with RequireClientCertificate, are the names one of
	// which the verified client certificate must carry (Server.ClientNames).
	ClientNames []string
}

func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func(start time.Time) { metrics.ProviderRequest(time.Since(start)) }(time.Now())
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		respond(w, http.StatusMethodNotAllowed, frameworks.Response{SystemError: "the quotakeeper provider answers POST only"})
		return
	}
	if h.RequireClientCertificate && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
		respond(w, http.StatusUnauthorized, frameworks.Response{SystemError: "the quotakeeper provider requires Gatekeeper's client certificate"})
		return
	}
	if h.RequireClientCertificate && len(h.ClientNames) > 0 {
		if err := authorizeClient(r.TLS.VerifiedChains, h.ClientNames); err != nil {
			respond(w, http.StatusForbidden, frameworks.Response{SystemError: "the quotakeeper provider: " + err.Error()})
			return
		}
	}
	var req frameworks.ProviderRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil && req.Kind != frameworks.ProviderRequestKind {
		err = fmt.Errorf("kind %q, want %q", req.Kind, frameworks.ProviderRequestKind)
	}
	if err != nil {
		respond(w, http.StatusBadRequest, frameworks.Response{SystemError: "the quotakeeper provider cannot read the request: " + err.Error()})
		return
	}
	items := make([]frameworks.Item, len(req.Request.Keys))
	for i, k := range req.Request.Keys {
		items[i] = h.answer(r, k)
	}
	respond(w, http.StatusOK, frameworks.Response{Items: items})
}

// answer calls the builtin key names; its halt or a key it cannot read is
// the item's error, which the twin turns into a denial.
func (h Handler) answer(r *http.Request, key string) frameworks.Item {
	var k Key
	d := json.NewDecoder(bytes.NewReader([]byte(key)))
	// Amounts are int64: a float64 would round those above 2^53.
	d.UseNumber()
	d.DisallowUnknownFields()
	if err := d.Decode(&k); err != nil {
		return frameworks.Item{Key: key, Error: fmt.Sprintf("the quotakeeper provider cannot read the key: %v", err)}
	}
	var env *builtins.Env
	if h.Env != nil {
		env = h.Env()
	}
	v, err := builtins.Call(r.Context(), env, k.Builtin, k.Args)
	if err != nil {
		var ce *builtins.CallError
		if errors.As(err, &ce) {
			return frameworks.Item{Key: key, Error: ce.Err.Error()}
		}
		return frameworks.Item{Key: key, Error: err.Error()}
	}
	return frameworks.Item{Key: key, Value: v}
}

func respond(w http.ResponseWriter, status int, resp frameworks.Response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(frameworks.ProviderResponse{
		APIVersion: apiVersion,
		Kind:       frameworks.ProviderResponseKind,
		Response:   resp,
	})
}
