package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledger/ledgertest"
)

// conformanceConfigs are the model's -D settings the test simulates: the
// defaults and a tighter grant, both lowered to 1 by the grant change; a
// compaction threshold of 2 and a fourth object, each under a grant of 4
// lowered to 3, which leaves room for the creates that compact; and a
// grant of 4 changed without lowering it and a longer tenant phase, where
// updates are stored and shrunk often enough for the seeds to reach them.
var conformanceConfigs = [][]string{
	nil,
	{"-DLIMIT0=2"},
	{"-DCOMPACT=2", "-DLIMIT0=4", "-DLIMIT1=3"},
	{"-DNOBJ=4", "-DLIMIT0=4", "-DLIMIT1=3"},
	{"-DLIMIT0=4", "-DLIMIT1=4", "-DMAXT=8"},
}

// conformanceSeeds per configuration: enough that every kind of line
// appears, few enough for a busy 2-core machine under -race.
const conformanceSeeds = 300

// spin is a process of its own, mostly waiting on its preprocessor: a few
// more simulations than cores keep the cores busy.
const conformanceWorkers = 4

// The real ledger, on the memory store, goes through random simulations of
// model/quota.pml action by action and holds the model's bucket after
// every write, so the protocol SPIN checks is the one the code runs.
func TestLedgerConformsToTheModel(t *testing.T) {
	ledgertest.RequireSpin(t)
	model, err := filepath.Abs(filepath.Join("..", "..", "model", "quota.pml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var models []*ledgertest.Model
	for _, flags := range conformanceConfigs {
		m, err := ledgertest.PrepareModel(ctx, t.TempDir(), model, flags)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, m)
	}
	type run struct {
		model *ledgertest.Model
		seed  int
	}
	runs := make(chan run)
	var (
		mu       sync.Mutex
		failures []string
		seen     = map[string]bool{}
		wg       sync.WaitGroup
	)
	for range conformanceWorkers {
		dir := t.TempDir() // spin writes pan.pre where it runs
		wg.Go(func() {
			for r := range runs {
				trace, err := r.model.Simulate(ctx, dir, r.seed)
				if err == nil {
					err = replayOnMemory(ctx, trace, r.model.Flags)
				}
				mu.Lock()
				for _, line := range trace {
					seen[strings.Fields(line)[1]] = true
				}
				if err != nil {
					failures = append(failures, ledgertest.DescribeFailure(r.model.Flags, r.seed, trace, err))
				}
				mu.Unlock()
			}
		})
	}
	for _, m := range models {
		for seed := 1; seed <= conformanceSeeds; seed++ {
			runs <- run{m, seed}
		}
	}
	close(runs)
	wg.Wait()

	const shown = 3
	for _, f := range failures[:min(shown, len(failures))] {
		t.Error(f)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d traces differ from the ledger (the first %d above)",
			len(failures), len(conformanceConfigs)*conformanceSeeds, min(shown, len(failures)))
	}
	// Traces that never reach an action would pass without testing it.
	var never []string
	for _, kind := range ledgertest.ModelLineKinds {
		if kind != "cover" && !seen[kind] {
			never = append(never, kind)
		}
	}
	if len(never) > 0 {
		t.Errorf("no trace has a %s line: the seeds no longer reach those actions", strings.Join(never, ", "))
	}
}

func replayOnMemory(ctx context.Context, trace []string, flags []string) error {
	opts, err := ledgertest.ModelOptionsFor(flags)
	if err != nil {
		return err
	}
	return ledgertest.ReplayModelTrace(ctx, ledger.NewMemoryStore(), trace, opts)
}

// The replay itself: a bucket line the ledger disagrees with fails at that
// line, naming both figures; corrected, the trace replays.
func TestReplayModelTraceReportsTheLine(t *testing.T) {
	trace := []string{
		"QK grant limit=2",
		"QK reserve obj=0 amount=1 granted=1 t=0",
		"QK bucket allocated=0 reservations=1,0,0, growths=0,0,0, sums=0,0,0,0, leases=0,0,",
		"QK stored obj=0",
		"QK counted obj=0 generation=0 amount=1",
		"QK observe allocated=1 t=0",
		"QK bucket allocated=2 reservations=0,0,0, growths=0,0,0, sums=0,0,0,0, leases=0,0,",
	}
	err := ledgertest.ReplayModelTrace(context.Background(), ledger.NewMemoryStore(), trace, ledgertest.ModelOptions{})
	te, ok := errors.AsType[*ledgertest.TraceError](err)
	if !ok || te.Line != 7 || !strings.Contains(err.Error(), "allocated: model 2, ledger 1") {
		t.Fatalf("got %v, want line 7's allocated to differ", err)
	}
	fixed := slices.Clone(trace)
	fixed[6] = strings.Replace(fixed[6], "allocated=2", "allocated=1", 1)
	fixed = append(fixed, "QK settled allocated=1 live=1 reserved=0")
	if err := ledgertest.ReplayModelTrace(context.Background(), ledger.NewMemoryStore(), fixed, ledgertest.ModelOptions{}); err != nil {
		t.Fatal(err)
	}
}
