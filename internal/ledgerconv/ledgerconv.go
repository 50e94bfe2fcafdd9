// Package ledgerconv converts between the API's values (api/v1alpha1) and
// the ledger's (ledger): consumers, object references and bucket keys.
//
// It is separate so that each side stays clean: api/v1alpha1 is the API
// and imports no engine, and ledger is the engine and imports no API. Every
// adapter that stands between them — the Kubernetes store, the controllers,
// the grants conversion, the tests — converts here, so there is one
// spelling of each conversion.
package ledgerconv

import (
	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Consumer converts an API consumer reference to the ledger's form.
func Consumer(r quotav1alpha1.ConsumerRef) ledger.Consumer {
	return ledger.Consumer{APIGroup: r.APIGroup, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace}
}

// ConsumerRef converts a ledger consumer to its API form.
func ConsumerRef(c ledger.Consumer) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: c.APIGroup, Kind: c.Kind, Name: c.Name, Namespace: c.Namespace}
}

// Object converts an API object reference to the ledger's form.
func Object(r quotav1alpha1.ObjectRef) ledger.ObjectRef {
	return ledger.ObjectRef{APIGroup: r.APIGroup, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}
}

// ObjectRef converts a ledger object reference to its API form.
func ObjectRef(o ledger.ObjectRef) quotav1alpha1.ObjectRef {
	return quotav1alpha1.ObjectRef{APIGroup: o.APIGroup, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
}

// KeyOf is the ledger key of a bucket object.
func KeyOf(obj *quotav1alpha1.AllowanceBucket) ledger.BucketKey {
	return ledger.NewBucketKey(Consumer(obj.Spec.ConsumerRef), obj.Spec.ResourceType, obj.Spec.Dimensions)
}
