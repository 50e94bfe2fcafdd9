package grants

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
)

// NewLedger wires the ledger a manager's process decides with: a Mirror on
// the manager's cache as the grant source, and a kubestore that writes (and
// reads before writing) through a live client while Get and List come from
// the cache, which indexes the buckets over their limit (audit asks it
// first). The live client matters: the store decides refusals on the state
// it read, which must not be a lagging cache. The quotakeeper manager and
// the Gatekeeper plugin build theirs the same way, one per process, in main
// (the manager's controllers and observer share it). Call once per manager
// (its cache refuses a second bucket index), before it starts; decide
// nothing until the mirror HasSynced.
func NewLedger(mgr manager.Manager, systemNamespace string, opts ...ledger.Option) (*ledger.Ledger, *Mirror, error) {
	m := NewMirror()
	if err := m.Register(context.Background(), mgr.GetCache()); err != nil {
		return nil, nil, err
	}
	live, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, nil, fmt.Errorf("live client: %w", err)
	}
	if err := kubestore.IndexOverLimit(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, nil, fmt.Errorf("bucket index: %w", err)
	}
	store := kubestore.New(live, kubestore.Options{SystemNamespace: systemNamespace, Reader: mgr.GetClient(), OverLimitIndexed: true})
	return ledger.New(store, m, opts...), m, nil
}
