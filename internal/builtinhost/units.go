package builtinhost

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

// registrationUnits is the builtins' UnitSource: each
// resource type's units, from the ResourceRegistration informer of the
// hosting process's cache, kept in a map so that an admission request never
// waits on the cache. Units only change how a denial shows its numbers,
// never a decision, so nothing waits for this informer to sync.
type registrationUnits struct {
	mu   sync.RWMutex
	regs map[string]registered // by registration name
}

// registered is what a registration tells about units.
type registered struct {
	resourceType string
	active       bool
	units        quotav1alpha1.Units
}

var _ builtins.UnitSource = (*registrationUnits)(nil)

func newRegistrationUnits() *registrationUnits {
	return &registrationUnits{regs: map[string]registered{}}
}

// register adds the event handlers to the registration informer.
func (r *registrationUnits) register(ctx context.Context, informers cache.Informers) error {
	inf, err := informers.GetInformer(ctx, &quotav1alpha1.ResourceRegistration{})
	if err != nil {
		return fmt.Errorf("registration informer: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    r.set,
		UpdateFunc: func(_, obj any) { r.set(obj) },
		DeleteFunc: r.forget,
	})
	return err
}

func (r *registrationUnits) set(obj any) {
	reg, ok := obj.(*quotav1alpha1.ResourceRegistration)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.regs[reg.Name] = registered{
		resourceType: reg.Spec.ResourceType,
		// At most one registration of a type is active (the manager's
		// registration controller); a deleted one no longer counts.
		active: reg.DeletionTimestamp == nil && meta.IsStatusConditionTrue(reg.Status.Conditions, quotav1alpha1.ConditionActive),
		units:  quotav1alpha1.UnitsOf(reg),
	}
}

func (r *registrationUnits) forget(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	reg, ok := obj.(*quotav1alpha1.ResourceRegistration)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.regs, reg.Name)
}

// UnitsFor implements builtins.UnitSource: the units of resourceType's
// active registration.
func (r *registrationUnits) UnitsFor(resourceType string) (quotav1alpha1.Units, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, reg := range r.regs {
		if reg.active && reg.resourceType == resourceType {
			return reg.units, true
		}
	}
	return quotav1alpha1.Units{}, false
}
