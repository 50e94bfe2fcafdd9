package controllers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/builders"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

var orgConsumerTemplate = quotav1alpha1.ConsumerRefTemplate{
	APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "{{.trigger.metadata.name}}",
}

// Done when: a GrantCreationPolicy on a trigger kind creates the rendered
// grant (amount, labels, rendered annotation, controller ownerRef),
// re-applying the trigger changes nothing, a second policy with a CEL name
// template creates its grant, and deleting the trigger removes its grants
// and leaves the others Active.
func TestGrantPolicyCreatesTheRenderedGrantOwnedByItsTrigger(t *testing.T) {
	needEnv(t)
	const rt = "t41.example.com/projects"
	newRegistration(t, "t41-projects", rt, organizationType)

	base := grantPolicy("t41-org", orgGVK, orgConsumerTemplate, rt, intstr.FromInt32(50),
		`has(object.status) && object.status.phase == "Active"`)
	base.Spec.Target.ResourceGrantTemplate.Metadata = quotav1alpha1.ObjectMetaTemplate{
		Labels:      map[string]string{"tier": "{{ trigger.spec.tier }}"},
		Annotations: map[string]string{"quota.example.com/organization": "{{.trigger.metadata.name}}"},
	}
	newReadyPolicy(t, base)

	acme := newTrigger(t, orgGVK, "", "t41-acme", map[string]any{"tier": "gold", "seats": int64(5)}, map[string]any{"phase": "Active"})
	g := waitGrant(t, sysNS, "t41-org-t41-acme-grant")
	// What the policy decides of a grant (requireGrant compares no more).
	want := builders.Grant("", "").
		Labels(map[string]string{"tier": "gold", quotav1alpha1.LabelPolicy: "t41-org", quotav1alpha1.LabelTriggerUID: string(acme.GetUID())}).
		Annotations(map[string]string{"quota.example.com/organization": "t41-acme", quotav1alpha1.AnnotationTrigger: "t41-acme"}).
		OwnedBy(metav1.OwnerReference{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Organization",
			Name: "t41-acme", UID: acme.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: nil}).
		Consumer(quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "t41-acme"}).
		Allowance(rt, 50).Obj()
	requireGrant(t, g, *want)
	if msg := waitCondition(t, g, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonGrantActive); msg != "grants t41.example.com/projects 50" {
		t.Errorf("Active message %q", msg)
	}
	wantPolicyEvent(t, "Organization", "", "t41-acme", string(acme.GetUID()), "Normal", "GrantCreated",
		"created ResourceGrant quotakeeper-system/t41-org-t41-acme-grant (GrantCreationPolicy t41-org)")
	wantPolicyEvent(t, "GrantCreationPolicy", "", "t41-org", "", "Normal", "GrantCreated",
		"created ResourceGrant quotakeeper-system/t41-org-t41-acme-grant for Organization t41-acme")

	// Re-applying the trigger (a change the policy does not read, and an
	// update that changes nothing) writes nothing.
	setField(t, acme, "Acme Corporation", "spec", "displayName")
	if err := k8s.Update(ctx, acme); err != nil {
		t.Fatal(err)
	}
	consistently(t, 2*time.Second, "the grant is left alone", func() error {
		now := &quotav1alpha1.ResourceGrant{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), now); err != nil {
			return err
		}
		if now.ResourceVersion != g.ResourceVersion {
			return fmt.Errorf("resourceVersion %s, was %s", now.ResourceVersion, g.ResourceVersion)
		}
		return nil
	})

	// A second policy on the kind, its name and amount rendered by CEL.
	bonus := grantPolicy("t41-bonus", orgGVK, orgConsumerTemplate, rt, intstr.FromString("{{ trigger.spec.seats * 2 }}"))
	bonus.Spec.Target.ResourceGrantTemplate.Metadata.Name = `{{ trigger.metadata.name + "-bonus" }}`
	newReadyPolicy(t, bonus)
	b := waitGrant(t, sysNS, "t41-acme-bonus")
	requireGrant(t, b, *builders.Grant("", "").
		Labels(map[string]string{quotav1alpha1.LabelPolicy: "t41-bonus", quotav1alpha1.LabelTriggerUID: string(acme.GetUID())}).
		Annotations(map[string]string{quotav1alpha1.AnnotationTrigger: "t41-acme"}).
		OwnedBy(metav1.OwnerReference{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Organization",
			Name: "t41-acme", UID: acme.GetUID(), Controller: ptr.To(true)}).
		Consumer(quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "t41-acme"}).
		Allowance(rt, 10).Obj())
	wantPolicyEvent(t, "GrantCreationPolicy", "", "t41-bonus", "", "Normal", "GrantCreated",
		"created ResourceGrant quotakeeper-system/t41-acme-bonus for Organization t41-acme")

	globex := newTrigger(t, orgGVK, "", "t41-globex", map[string]any{"tier": "silver", "seats": int64(1)}, map[string]any{"phase": "Active"})
	waitGrant(t, sysNS, "t41-org-t41-globex-grant")
	waitGrant(t, sysNS, "t41-globex-bonus")

	// Deleting a trigger deletes its grants (the controller does; this
	// suite runs no garbage collector), and only its.
	if err := k8s.Delete(ctx, acme); err != nil {
		t.Fatal(err)
	}
	waitNoGrant(t, sysNS, "t41-org-t41-acme-grant")
	waitNoGrant(t, sysNS, "t41-acme-bonus")
	wantPolicyEvent(t, "Organization", "", "t41-acme", string(acme.GetUID()), "Normal", "GrantDeleted",
		"deleted ResourceGrant quotakeeper-system/t41-acme-bonus (GrantCreationPolicy t41-bonus): the trigger is gone")
	wantPolicyEvent(t, "GrantCreationPolicy", "", "t41-org", "", "Normal", "GrantDeleted",
		"deleted ResourceGrant quotakeeper-system/t41-org-t41-acme-grant for Organization t41-acme: the trigger is gone")
	for name, msg := range map[string]string{
		"t41-org-t41-globex-grant": "grants t41.example.com/projects 50",
		"t41-globex-bonus":         "grants t41.example.com/projects 2",
	} {
		g := waitGrant(t, sysNS, name)
		if g.Labels[quotav1alpha1.LabelTriggerUID] != string(globex.GetUID()) {
			t.Errorf("grant %s: trigger uid %q, want globex's", name, g.Labels[quotav1alpha1.LabelTriggerUID])
		}
		if got := waitCondition(t, g, quotav1alpha1.ConditionActive, metav1.ConditionTrue, quotav1alpha1.ReasonGrantActive); got != msg {
			t.Errorf("grant %s: Active message %q, want %q", name, got, msg)
		}
	}
	if got, want := policyGrants(t, "t41-org"), []string{"quotakeeper-system/t41-org-t41-globex-grant"}; !cmp.Equal(got, want) {
		t.Errorf("t41-org's grants %v, want %v", got, want)
	}
}

// requireGrant compares what a policy decides of a grant: labels,
// annotations, owner references and spec.
func requireGrant(t *testing.T, got *quotav1alpha1.ResourceGrant, want quotav1alpha1.ResourceGrant) {
	t.Helper()
	gotDecided := quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{
		Labels: got.Labels, Annotations: got.Annotations, OwnerReferences: got.OwnerReferences}, Spec: got.Spec}
	if diff := cmp.Diff(want, gotDecided); diff != "" {
		t.Fatalf("grant %s/%s (-want +got):\n%s", got.Namespace, got.Name, diff)
	}
}

// A grant follows its trigger: conditions turning false delete it, true
// again create it anew, its amount follows the trigger; a grant edited or
// deleted by hand is put back; a trigger the policy cannot render keeps its
// grant and says why.
func TestGrantPolicyFollowsItsConditions(t *testing.T) {
	needEnv(t)
	const rt = "t42.example.com/projects"
	newRegistration(t, "t42-projects", rt, organizationType)
	p := grantPolicy("t42-org", orgGVK, orgConsumerTemplate, rt, intstr.FromString("{{ trigger.spec.seats }}"),
		`object.status.phase == "Active"`)
	newReadyPolicy(t, p)
	org := newTrigger(t, orgGVK, "", "t42-initech", map[string]any{"seats": int64(3)}, map[string]any{"phase": "Active"})
	const name = "t42-org-t42-initech-grant"
	waitGrant(t, sysNS, name)

	setField(t, org, "Suspended", "status", "phase")
	waitNoGrant(t, sysNS, name)
	wantPolicyEvent(t, "Organization", "", "t42-initech", string(org.GetUID()), "Normal", "GrantDeleted",
		"deleted ResourceGrant quotakeeper-system/t42-org-t42-initech-grant (GrantCreationPolicy t42-org): the policy's conditions do not hold")

	setField(t, org, "Active", "status", "phase")
	g := waitGrant(t, sysNS, name)

	// The amount comes from the trigger; an edit of the grant is put back.
	setField(t, org, int64(4), "spec", "seats")
	testenv.Eventually(t, settle, "amount follows the trigger", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			return err
		}
		if got := g.Spec.Allowances[0].Buckets[0].Amount; got != 4 {
			return fmt.Errorf("amount %d, want 4", got)
		}
		return nil
	})
	wantPolicyEvent(t, "Organization", "", "t42-initech", string(org.GetUID()), "Normal", "GrantUpdated",
		"updated ResourceGrant quotakeeper-system/t42-org-t42-initech-grant (GrantCreationPolicy t42-org)")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			return err
		}
		g.Spec.Allowances[0].Buckets[0].Amount = 1000
		return k8s.Update(ctx, g)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "a hand edit is put back", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), g); err != nil {
			return err
		}
		if got := g.Spec.Allowances[0].Buckets[0].Amount; got != 4 {
			return fmt.Errorf("amount %d, want 4", got)
		}
		return nil
	})

	// A grant deleted by hand is made again.
	if err := k8s.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "a deleted grant is made again", func() error {
		again := &quotav1alpha1.ResourceGrant{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), again); err != nil {
			return err
		}
		if again.UID == g.UID {
			return fmt.Errorf("still the deleted grant")
		}
		return nil
	})

	// A status without a phase fails the condition's evaluation: the
	// grant stays, and the events say why.
	setField(t, org, map[string]any{}, "status")
	wantPolicyEvent(t, "Organization", "", "t42-initech", string(org.GetUID()), "Warning", "GrantFailed",
		`could not render ResourceGrant (GrantCreationPolicy t42-org): spec.trigger.conditions[0].expression: Invalid value: "object.status.phase == \"Active\"": evaluation failed: no such key: phase`)
	wantPolicyEvent(t, "GrantCreationPolicy", "", "t42-org", "", "Warning", "GrantFailed",
		`could not render ResourceGrant for Organization t42-initech: spec.trigger.conditions[0].expression: Invalid value: "object.status.phase == \"Active\"": evaluation failed: no such key: phase`)
	waitGrant(t, sysNS, name)
}

// Done when: a namespace-templated policy writes into the rendered
// namespace. A grant in the trigger's own namespace is owned by it; one in
// another namespace cannot be (an owner must share the namespace), and the
// controller still deletes it with its trigger.
func TestNamespaceTemplatedGrantPolicyWritesIntoTheRenderedNamespace(t *testing.T) {
	needEnv(t)
	newNamespace(t, "t43-projects", nil)
	newNamespace(t, "t43-team-a", nil)
	p := grantPolicy("t43-configmaps", projectGVK,
		quotav1alpha1.ConsumerRefTemplate{Kind: "Namespace", Name: "{{ trigger.spec.team }}"}, rtConfigMaps,
		intstr.FromString("{{ trigger.spec.configmaps }}"))
	p.Spec.Target.ResourceGrantTemplate.Metadata = quotav1alpha1.ObjectMetaTemplate{
		Name: "{{ trigger.metadata.name }}-configmaps", Namespace: "{{ trigger.spec.team }}",
	}
	newReadyPolicy(t, p)

	elsewhere := newTrigger(t, projectGVK, "t43-projects", "p1", map[string]any{"team": "t43-team-a", "configmaps": int64(3)}, nil)
	g1 := waitGrant(t, "t43-team-a", "p1-configmaps")
	requireGrant(t, g1, *builders.Grant("", "").
		Labels(map[string]string{quotav1alpha1.LabelPolicy: "t43-configmaps", quotav1alpha1.LabelTriggerUID: string(elsewhere.GetUID())}).
		Annotations(map[string]string{quotav1alpha1.AnnotationTrigger: "t43-projects/p1"}).
		Consumer(quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "t43-team-a"}).
		Allowance(rtConfigMaps, 3).Obj())

	inPlace := newTrigger(t, projectGVK, "t43-team-a", "p2", map[string]any{"team": "t43-team-a", "configmaps": int64(4)}, nil)
	g2 := waitGrant(t, "t43-team-a", "p2-configmaps")
	wantOwners := []metav1.OwnerReference{{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Project",
		Name: "p2", UID: inPlace.GetUID(), Controller: ptr.To(true)}}
	if diff := cmp.Diff(wantOwners, g2.OwnerReferences); diff != "" {
		t.Errorf("p2's grant owners (-want +got):\n%s", diff)
	}
	wantBucket(t, bucketKey(nsConsumer("t43-team-a"), rtConfigMaps, nil), usage{limit: 7, available: 7})

	if err := k8s.Delete(ctx, elsewhere); err != nil {
		t.Fatal(err)
	}
	waitNoGrant(t, "t43-team-a", "p1-configmaps")
	wantPolicyEvent(t, "Project", "t43-projects", "p1", string(elsewhere.GetUID()), "Normal", "GrantDeleted",
		"deleted ResourceGrant t43-team-a/p1-configmaps (GrantCreationPolicy t43-configmaps): the trigger is gone")
	waitGrant(t, "t43-team-a", "p2-configmaps")
	wantBucket(t, bucketKey(nsConsumer("t43-team-a"), rtConfigMaps, nil), usage{limit: 4, available: 4})
}

// parentContext: the grant exists only while the parent does, and is
// owned by it.
func TestGrantPolicyWithAParentContextFollowsTheParent(t *testing.T) {
	needEnv(t)
	const rt = "t44.example.com/projects"
	newRegistration(t, "t44-projects", rt, organizationType)
	newNamespace(t, "t44-projects", nil)
	p := grantPolicy("t44-parent", projectGVK, quotav1alpha1.ConsumerRefTemplate{
		APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "{{ trigger.spec.organization }}"}, rt, intstr.FromInt32(2))
	p.Spec.Target.ResourceGrantTemplate.Metadata.Name = "{{ trigger.metadata.name }}-from-parent"
	p.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization",
		NameExpression: "trigger.spec.organization"}
	newReadyPolicy(t, p)

	project := newTrigger(t, projectGVK, "t44-projects", "web", map[string]any{"organization": "t44-hooli"}, nil)
	consistently(t, 2*time.Second, "no grant without its parent", func() error {
		if got := policyGrants(t, "t44-parent"); len(got) != 0 {
			return fmt.Errorf("grants %v", got)
		}
		return nil
	})

	org := newTrigger(t, orgGVK, "", "t44-hooli", map[string]any{}, nil)
	g := waitGrant(t, sysNS, "web-from-parent")
	// The project is namespaced and the grant lives in the system
	// namespace: the parent is its only owner.
	wantOwners := []metav1.OwnerReference{{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Organization",
		Name: "t44-hooli", UID: org.GetUID(), Controller: ptr.To(false)}}
	if diff := cmp.Diff(wantOwners, g.OwnerReferences); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}

	if err := k8s.Delete(ctx, org); err != nil {
		t.Fatal(err)
	}
	waitNoGrant(t, sysNS, "web-from-parent")
	wantPolicyEvent(t, "Project", "t44-projects", "web", string(project.GetUID()), "Normal", "GrantDeleted",
		"deleted ResourceGrant quotakeeper-system/web-from-parent (GrantCreationPolicy t44-parent): parent Organization t44-hooli does not exist")
}

// A policy that is deleted or disabled stops watching (its informer's
// watch on the API server ends) and leaves its grants, as Milo does.
// Enabled again, it adopts them: a grant whose trigger went meanwhile is
// deleted, a trigger that came meanwhile gets its grant.
func TestDeletingOrDisablingAGrantPolicyStopsItsWatchAndKeepsItsGrants(t *testing.T) {
	needEnv(t)
	const rt = "t45.example.com/projects"
	newRegistration(t, "t45-projects", rt, organizationType)
	watchers := func(want int) {
		t.Helper()
		testenv.WaitWatchers(ctx, t, settle, env.Config, orgGVK.Group, "organizations", want)
	}
	watchers(0) // no other test's policy is left watching

	p := grantPolicy("t45-org", orgGVK, orgConsumerTemplate, rt, intstr.FromInt32(1))
	newReadyPolicy(t, p)
	watchers(1)
	first := newTrigger(t, orgGVK, "", "t45-first", map[string]any{}, nil)
	waitGrant(t, sysNS, "t45-org-t45-first-grant")

	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	watchers(0)
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	newTrigger(t, orgGVK, "", "t45-second", map[string]any{}, nil)
	consistently(t, 2*time.Second, "a deleted policy's grants stay, and it makes none", func() error {
		if got, want := policyGrants(t, "t45-org"), []string{"quotakeeper-system/t45-org-t45-first-grant"}; !cmp.Equal(got, want) {
			return fmt.Errorf("grants %v, want %v", got, want)
		}
		return nil
	})

	p = grantPolicy("t45-org", orgGVK, orgConsumerTemplate, rt, intstr.FromInt32(1))
	newReadyPolicy(t, p)
	watchers(1)
	waitNoGrant(t, sysNS, "t45-org-t45-first-grant")
	waitGrant(t, sysNS, "t45-org-t45-second-grant")

	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Disabled = true
	if err := k8s.Patch(ctx, p, patch); err != nil {
		t.Fatal(err)
	}
	wantReady(t, p, metav1.ConditionFalse, quotav1alpha1.ReasonPolicyDisabled, "spec.disabled is true")
	watchers(0)
	if got, want := policyGrants(t, "t45-org"), []string{"quotakeeper-system/t45-org-t45-second-grant"}; !cmp.Equal(got, want) {
		t.Errorf("a disabled policy's grants %v, want %v", got, want)
	}
}
