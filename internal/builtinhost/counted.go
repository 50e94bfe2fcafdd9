package builtinhost

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/counted"
)

// countedRecord is the builtins' CountedPolicies: the
// record the manager's observer publishes (package counted), from an
// informer on that one ConfigMap, so that the process watches no other
// ConfigMap for it. Until the informer has the record, nothing is counted
// and quota.reserve denies: failing closed, for the milliseconds of a
// start.
type countedRecord struct {
	record atomic.Pointer[counted.Record]
}

var _ builtins.CountedPolicies = (*countedRecord)(nil)

func (c *countedRecord) Counted(version string) bool {
	r := c.record.Load()
	return r != nil && r.Has(version)
}

func (c *countedRecord) set(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	r := counted.Record(cm.Data)
	c.record.Store(&r)
}

func (c *countedRecord) forget(any) {
	empty := counted.Record{}
	c.record.Store(&empty)
}

// countedInformer runs the record's informer: on every replica, as
// admission does.
type countedInformer struct {
	record    *countedRecord
	client    kubernetes.Interface
	namespace string
}

func newCountedInformer(mgr manager.Manager, namespace string, record *countedRecord) (countedInformer, error) {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return countedInformer{}, fmt.Errorf("counted policies: %w", err)
	}
	return countedInformer{record: record, client: cs, namespace: namespace}, nil
}

func (countedInformer) NeedLeaderElection() bool { return false }

func (i countedInformer) Start(ctx context.Context) error {
	c := i.record
	lw := toolscache.NewListWatchFromClient(i.client.CoreV1().RESTClient(), "configmaps", i.namespace,
		fields.OneTermEqualSelector("metadata.name", counted.ConfigMapName))
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.set,
		UpdateFunc: func(_, obj any) { c.set(obj) },
		DeleteFunc: c.forget,
	}); err != nil {
		return err
	}
	inf.Run(ctx.Done())
	return nil
}
