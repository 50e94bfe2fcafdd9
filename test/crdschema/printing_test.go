package crdschema_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// What `kubectl get` shows, asked of a real apiserver: kubectl expands a
// category and resolves a short name through discovery, as below.

// `kubectl get quotakeeper` lists every kind of ours, and `kubectl get quota`
// still means core ResourceQuotas (its short name), not a category of ours.
func TestCategoryAndShortNames(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(config)
	expander := restmapper.NewDiscoveryCategoryExpander(dc)
	got, ok := expander.Expand("quotakeeper")
	if !ok {
		t.Fatal("category quotakeeper unknown to discovery")
	}
	var kinds []string
	for _, gr := range got {
		kinds = append(kinds, gr.Resource)
	}
	slices.Sort(kinds)
	want := []string{"allowancebuckets", "claimcreationpolicies", "effectiveresourcegrants", "grantcreationpolicies",
		"quotabypasses", "resourceclaims", "resourcegrants", "resourceregistrations"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("category quotakeeper (-want +got):\n%s", diff)
	}
	if got, ok := expander.Expand("quota"); ok {
		t.Errorf("a category named quota exists (%v): `kubectl get quota` would list it instead of ResourceQuotas", got)
	}

	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dc, nil)
	for short, resource := range map[string]schema.GroupVersionResource{
		"quota":  {Version: "v1", Resource: "resourcequotas"},
		"bucket": {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "allowancebuckets"},
		"erg":    {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "effectiveresourcegrants"},
		"rclaim": {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "resourceclaims"},
		"rgrant": {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "resourcegrants"},
		"rreg":   {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "resourceregistrations"},
		"gcp":    {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "grantcreationpolicies"},
		"ccp":    {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "claimcreationpolicies"},
		// No core or common kind's short name.
		"qbypass": {Group: "quota.miloapis.com", Version: "v1alpha1", Resource: "quotabypasses"},
	} {
		got, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: short})
		if err != nil || got != resource {
			t.Errorf("kubectl get %s: resolves to %v (%v), want %v", short, got, err, resource)
		}
	}
}

// The columns `kubectl get` prints for each kind, as the apiserver serves
// them: a bucket row names its consumer's kind and its dimensions, so two
// buckets that differ only by either print different rows.
func TestPrinterColumns(t *testing.T) {
	want := map[string][]string{
		"allowancebuckets":        {"Consumer Kind=.spec.consumerRef.kind", "Consumer=.spec.consumerRef.name", "Resource Type=.spec.resourceType", "Dimensions=.spec.dimensions", "Limit=.status.limit", "Allocated=.status.allocated", "Reserved=.status.reserved", "Available=.status.available", `Over Limit=.status.conditions[?(@.type=="OverLimit")].status`},
		"effectiveresourcegrants": {"Consumer Kind=.spec.consumerRef.kind", "Consumer=.spec.consumerRef.name", "Resource Type=.spec.resourceType", "Limit=.status.display.limit", "Allocated=.status.display.allocated", "Reserved=.status.display.reserved", "Available=.status.display.available", "Base Unit=.status.units.baseUnit", "Base Limit=.status.totalLimit", "Base Allocated=.status.totalAllocated", "Base Reserved=.status.totalReserved", "Base Available=.status.available"},
		"resourceclaims":          {"Consumer Kind=.spec.consumerRef.kind", "Consumer=.spec.consumerRef.name", `Granted=.status.conditions[?(@.type=="Granted")].status`, `Reason=.status.conditions[?(@.type=="Granted")].reason`, "Age=.metadata.creationTimestamp"},
		"resourcegrants":          {"Consumer Kind=.spec.consumerRef.kind", "Consumer=.spec.consumerRef.name", "Delegated From=.spec.delegatedFrom.consumerRef.name", `Active=.status.conditions[?(@.type=="Active")].status`, "Age=.metadata.creationTimestamp"},
		"resourceregistrations":   {"Resource Type=.spec.resourceType", "Type=.spec.type", `Active=.status.conditions[?(@.type=="Active")].status`, "Age=.metadata.creationTimestamp"},
		"grantcreationpolicies":   {"Trigger=.spec.trigger.resource.kind", `Ready=.status.conditions[?(@.type=="Ready")].status`},
		"claimcreationpolicies":   {"Trigger=.spec.trigger.resource.kind", `Ready=.status.conditions[?(@.type=="Ready")].status`},
		"quotabypasses":           {"Reason=.spec.reason", "Expires=.status.expiresAt", `Active=.status.conditions[?(@.type=="Active")].status`},
	}
	for plural, columns := range want {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: plural + ".quota.miloapis.com"}, crd); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got = append(got, c.Name+"="+c.JSONPath)
		}
		if diff := cmp.Diff(columns, got); diff != "" {
			t.Errorf("%s printer columns (-want +got):\n%s", plural, diff)
		}
	}
}
