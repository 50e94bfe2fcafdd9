package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// failingStore passes Apply through to a MemoryStore until the call numbered
// giveUpAt: that one cancels the caller (as a deadline passing mid-write
// does) and answers that its outcome is unknown, and every Apply after it
// fails as a store that went away does.
type failingStore struct {
	*ledger.MemoryStore
	calls    atomic.Int32
	giveUpAt int32
	cancel   context.CancelFunc
}

func (s *failingStore) Apply(ctx context.Context, key ledger.BucketKey, mutate func(*ledger.Bucket) error) (ledger.Bucket, error) {
	switch n := s.calls.Add(1); {
	case n < s.giveUpAt:
		return s.MemoryStore.Apply(ctx, key, mutate)
	case n == s.giveUpAt:
		s.cancel()
		return ledger.Bucket{}, fmt.Errorf("%w: %w", ledger.ErrOutcomeUnknown, ctx.Err())
	default:
		return ledger.Bucket{}, errors.New("store down")
	}
}

// A caller whose deadline passes is answered at once and its reservations
// are rolled back behind it; when that rollback fails nobody is left to
// return the error to, so it is logged with the logger of the caller's
// context, naming the claim (before, it was dropped).
func TestAFailedRollbackBehindACallerWhoGaveUpIsLogged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := &failingStore{MemoryStore: ledger.NewMemoryStore(), giveUpAt: 2, cancel: cancel}
	grants := ledger.NewGrantSet()
	for _, g := range []ledger.Grant{
		{ID: "ns/p#0", Generation: 1, Consumer: project("p"), ResourceType: rtProjects, Amount: 10},
		{ID: "ns/o#0", Generation: 1, Consumer: org("o"), ResourceType: rtProjects, Amount: 10},
	} {
		if err := grants.Set(g); err != nil {
			t.Fatal(err)
		}
	}
	l := ledger.New(store, grants)
	logged := make(chan string, 4)
	ctx = logr.NewContext(ctx, funcr.New(func(_, args string) { logged <- args }, funcr.Options{}))

	_, err := l.Reserve(ctx, claim("c", req(project("p"), rtProjects, 1, nil), req(org("o"), rtProjects, 1, nil)))
	if !errors.Is(err, ledger.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve: %v, want the outcome unknown after the caller gave up", err)
	}
	select {
	case line := <-logged:
		for _, want := range []string{
			`"msg"="rolling back a reservation whose caller gave up failed; it holds quota until it expires"`,
			`"claim"="c"`,
			`store down`,
		} {
			if !strings.Contains(line, want) {
				t.Errorf("log line %s\nlacks %s", line, want)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed background rollback was not logged")
	}
}
