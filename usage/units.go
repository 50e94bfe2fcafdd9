package usage

import (
	"context"
	"math/big"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// Unit is how one resource type's amounts are shown: amounts are counted in
// baseUnit; people read them in displayUnit, factor base units to one.
type Unit struct {
	BaseUnit             string `json:"baseUnit,omitempty"`
	DisplayUnit          string `json:"displayUnit,omitempty"`
	UnitConversionFactor int64  `json:"unitConversionFactor,omitempty"`
}

// Format shows a base-unit amount in display units ("8 cores" for 8000 with
// factor 1000), else in base units ("8000 millicores"), else bare when the
// registration could not be read. A part of a display unit is shown with up
// to three decimals ("0.5 cores"): exact for the usual factors (powers of
// ten), rounded for others.
func (u Unit) Format(amount int64) string {
	if u.DisplayUnit == "" || u.UnitConversionFactor < 1 {
		return withUnit(strconv.FormatInt(amount, 10), u.BaseUnit)
	}
	value := new(big.Rat).SetFrac64(amount, u.UnitConversionFactor).FloatString(3)
	value = strings.TrimRight(strings.TrimRight(value, "0"), ".")
	return withUnit(value, u.DisplayUnit)
}

// Base shows the amount as the API holds it, with its base unit.
func (u Unit) Base(amount int64) string {
	return withUnit(strconv.FormatInt(amount, 10), u.BaseUnit)
}

func withUnit(value, unit string) string {
	if unit == "" {
		return value
	}
	return value + " " + unit
}

// Units reads every ResourceRegistration's units, by resource type. Only the
// active registration of a resource type counts (an inactive second one may
// declare other units). Registrations are cluster-scoped and tenants may not
// be allowed to read them: then amounts are shown as bare base-unit numbers
// rather than the command failing.
func Units(ctx context.Context, c client.Client) (map[string]Unit, error) {
	var regs quotav1alpha1.ResourceRegistrationList
	if err := c.List(ctx, &regs); err != nil {
		if apierrors.IsForbidden(err) {
			return map[string]Unit{}, nil
		}
		return nil, err
	}
	out := map[string]Unit{}
	for _, r := range regs.Items {
		active := meta.IsStatusConditionTrue(r.Status.Conditions, quotav1alpha1.ConditionActive)
		if _, seen := out[r.Spec.ResourceType]; seen && !active {
			continue
		}
		out[r.Spec.ResourceType] = Unit{
			BaseUnit:             r.Spec.BaseUnit,
			DisplayUnit:          r.Spec.DisplayUnit,
			UnitConversionFactor: r.Spec.UnitConversionFactor,
		}
	}
	return out, nil
}
