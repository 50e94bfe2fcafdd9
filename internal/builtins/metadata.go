package builtins

// quota.reserve's optional claim.metadata: what the observer's view of the
// claim (a ResourceClaim it writes per counted object) is called and
// carries. The ledger never sees it; it is validated here so that a policy
// with a bad name or label fails at admission, with the field, instead of
// later when the observer writes the view.

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// ClaimMetadata is the metadata a claim asks its ResourceClaim view to
// have; every field is optional.
type ClaimMetadata struct {
	// View: the claim asked for a view (it has a metadata field, empty or
	// not). A QuotaClaimPolicy's claims always do (Milo's contract); a
	// QuotaEntity's or QuotaAllocation's only with parameters.claimViews.
	View         bool
	Name         string
	GenerateName string
	Namespace    string
	Labels       map[string]string
	Annotations  map[string]string
}

// RecordedClaim is one claim quota.reserve was asked for in observe mode,
// with its metadata.
type RecordedClaim struct {
	Claim    ledger.Claim
	Metadata ClaimMetadata
}

// ClaimsOf is the claims of recorded, in order: what an evaluation in
// observe mode asked for, as counting.Amounts combines it into what the
// object counts.
func ClaimsOf(recorded []RecordedClaim) []ledger.Claim {
	claims := make([]ledger.Claim, len(recorded))
	for i, rc := range recorded {
		claims[i] = rc.Claim
	}
	return claims
}

// metadata decodes and validates m["metadata"]; absent is the zero value.
func (d *decoder) metadata(path string, m map[string]any) ClaimMetadata {
	v, ok := m["metadata"]
	if !ok {
		return ClaimMetadata{}
	}
	path += ".metadata"
	mm := d.object(path, v, "name", "generateName", "namespace", "labels", "annotations")
	if mm == nil {
		return ClaimMetadata{}
	}
	md := ClaimMetadata{
		View:         true,
		Name:         d.str(path, mm, "name"),
		GenerateName: d.str(path, mm, "generateName"),
		Namespace:    d.str(path, mm, "namespace"),
		Labels:       d.stringMap(path, mm, "labels"),
		Annotations:  d.stringMap(path, mm, "annotations"),
	}
	fld := field.NewPath(path)
	var errs field.ErrorList
	if md.Name != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(md.Name, false) {
			errs = append(errs, field.Invalid(fld.Child("name"), md.Name, msg))
		}
	}
	if md.GenerateName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(md.GenerateName, true) {
			errs = append(errs, field.Invalid(fld.Child("generateName"), md.GenerateName, msg))
		}
	}
	if md.Namespace != "" {
		for _, msg := range apivalidation.ValidateNamespaceName(md.Namespace, false) {
			errs = append(errs, field.Invalid(fld.Child("namespace"), md.Namespace, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(md.Labels, fld.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(md.Annotations, fld.Child("annotations"))...)
	for _, e := range errs {
		d.errs = append(d.errs, e.Error())
	}
	return md
}
