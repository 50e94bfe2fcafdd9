package kubestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger/kubestore"
	"github.com/quotakeeper/quotakeeper/internal/ledger/ledgertest"
)

// The model's traces on the Kubernetes store: the bucket object's status
// must round-trip every write the model makes (sums, growths, figures).
// Fewer seeds than the memory store's test (each write is an API call), in
// the setting whose traces write the most: compaction, growths stored,
// expired and shrunk.
func TestKubeStoreConformsToTheModel(t *testing.T) {
	ledgertest.RequireSpin(t)
	model, err := filepath.Abs(filepath.Join("..", "..", "..", "model", "quota.pml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := t.TempDir() // spin writes pan.pre where it runs
	m, err := ledgertest.PrepareModel(ctx, dir, model, []string{"-DLIMIT0=4", "-DLIMIT1=4", "-DMAXT=8"})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := ledgertest.ModelOptionsFor(m.Flags)
	if err != nil {
		t.Fatal(err)
	}
	store := kubestore.New(newClient(t), kubestore.Options{})
	const seeds = 20
	for seed := 1; seed <= seeds; seed++ {
		trace, err := m.Simulate(ctx, dir, seed)
		if err == nil {
			opts.Consumer = org(unique("conformance")) // a bucket of its own
			err = ledgertest.ReplayModelTrace(ctx, store, trace, opts)
		}
		if err != nil {
			t.Error(ledgertest.DescribeFailure(m.Flags, seed, trace, err))
		}
	}
}
