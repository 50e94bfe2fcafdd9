// Package suite runs gator test suites (test.gatekeeper.sh/v1alpha1 Suite)
// for quota ConstraintTemplates. Every review is run by gator's own verify
// runner; this package adds what quota needs around it:
//
//   - quota: ResourceRegistration and ResourceGrant files, read into a fresh
//     in-memory ledger for every case (so cases never see each other's
//     reservations);
//   - admission: the admission context of a review (operation, request uid,
//     dryRun, oldObject), turned into the AdmissionReview that gator already
//     knows how to review, so a plain object file can be admitted as a CREATE;
//   - steps: a sequence of reviews within one case, sharing its ledger, each
//     with its own assertions (three creates allowed, the fourth denied);
//   - usage: the bucket numbers expected after a case or a step.
//
// Usage reads as in a cluster that has settled: after a step a cluster
// would have admitted, the object counts as quotakeeper's observer would
// count it (allocated, its reservations folded), and an admitted DELETE
// stops it counting (observe.go).
//
// Standard gator fields keep their meaning; a suite without extensions runs
// as gator verify would run it (with the quota builtins available).
package suite

import (
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Suite is gator's Suite with quota extensions.
type Suite struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Tests      []Test            `json:"tests"`
	Skip       bool              `json:"skip"`

	// path is the suite file's path in the runner's file system; input is
	// the path as the user named it, for reports.
	path, input string
}

// Test is gator's Test (a template, a constraint, cases) with quota files
// shared by its cases.
type Test struct {
	Name       string `json:"name"`
	Template   string `json:"template"`
	Constraint string `json:"constraint"`
	Expansion  string `json:"expansion,omitempty"`
	Cases      []Case `json:"cases,omitempty"`
	Invalid    bool   `json:"invalid,omitempty"`
	Skip       bool   `json:"skip,omitempty"`

	// Quota lists files of ResourceRegistrations and ResourceGrants loaded
	// into the ledger of every case of the test, before the case's own.
	Quota []string `json:"quota,omitempty"`
}

// Case is gator's Case with quota extensions. A case either reviews its own
// Object (gator's fields, optionally with Admission and Usage) or runs Steps.
type Case struct {
	Name       string             `json:"name"`
	Object     string             `json:"object,omitempty"`
	Inventory  []string           `json:"inventory,omitempty"`
	Assertions []verify.Assertion `json:"assertions,omitempty"`
	Skip       bool               `json:"skip,omitempty"`

	// Quota lists files of ResourceRegistrations and ResourceGrants for this
	// case's ledger, after the test's.
	Quota []string `json:"quota,omitempty"`
	// Admission reviews Object as an admission request; without it a plain
	// object is reviewed as Gatekeeper's audit does (no operation, no uid).
	Admission *Admission `json:"admission,omitempty"`
	// Usage is checked after the review (or after the last step).
	Usage []Usage `json:"usage,omitempty"`
	// Steps are reviewed in order against the case's ledger. Inventory
	// applies to every step. Mutually exclusive with Object, Admission and
	// Assertions.
	Steps []Step `json:"steps,omitempty"`
}

// Step is one review of a sequence.
type Step struct {
	Name       string             `json:"name,omitempty"`
	Object     string             `json:"object"`
	Admission  *Admission         `json:"admission,omitempty"`
	Inventory  []string           `json:"inventory,omitempty"`
	Assertions []verify.Assertion `json:"assertions"`
	Usage      []Usage            `json:"usage,omitempty"`
}

// Admission is the admission context of a review.
type Admission struct {
	// Operation is CREATE (the default), UPDATE, DELETE or CONNECT.
	Operation string `json:"operation,omitempty"`
	// UID is the admission request's uid. Empty sends none, like a review
	// that is not a real admission: nothing is reserved.
	UID string `json:"uid,omitempty"`
	// DryRun marks a dry-run request: nothing is reserved.
	DryRun bool `json:"dryRun,omitempty"`
	// OldObject is the path of the object before an UPDATE or DELETE.
	OldObject string `json:"oldObject,omitempty"`
	// Resource is the resource the request is made to, and SubResource its
	// subresource: a Scale (autoscaling/v1) is the scale subresource of its
	// workload's resource, e.g. {group: apps, version: v1, resource:
	// deployments}, which it does not name itself. Required for a Scale;
	// SubResource then defaults to "scale".
	Resource    *metav1.GroupVersionResource `json:"resource,omitempty"`
	SubResource string                       `json:"subResource,omitempty"`
}

// Usage is the expected state of one bucket; only the numbers given are
// compared.
type Usage struct {
	Consumer     Consumer          `json:"consumer"`
	ResourceType string            `json:"resourceType"`
	Dimensions   map[string]string `json:"dimensions,omitempty"`
	Limit        *int64            `json:"limit,omitempty"`
	Allocated    *int64            `json:"allocated,omitempty"`
	Reserved     *int64            `json:"reserved,omitempty"`
	Available    *int64            `json:"available,omitempty"`
}

// Consumer names a bucket's consumer.
type Consumer struct {
	APIGroup  string `json:"apiGroup,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}
