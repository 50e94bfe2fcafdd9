package builtins

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selects implements quota.selects(selector, labels): whether a
// metav1.LabelSelector ({matchLabels, matchExpressions}) selects labels, by
// apimachinery's own rules. The library applies a constraint's
// parameters.labelSelector with it to an object before and after an
// update, so an update that labels an object into scope is charged like a
// create (issue 22, case 6), which Gatekeeper's match.labelSelector cannot
// tell the template.
func selects(bctx rego.BuiltinContext, selTerm, labelsTerm *ast.Term) (*ast.Term, error) {
	return invalidInputHalts(bctx, SelectsName)(selectsOf(selTerm, labelsTerm))
}

func selectsOf(selTerm, labelsTerm *ast.Term) (*ast.Term, error) {
	sel, err := toJSON("selector", selTerm)
	if err != nil {
		return nil, err
	}
	lv, err := toJSON("labels", labelsTerm)
	if err != nil {
		return nil, err
	}
	selected, err := selectorSelects(sel, lv)
	if err != nil {
		return nil, err
	}
	return ast.BooleanTerm(selected), nil
}

// selectorSelects is quota.selects on JSON values.
func selectorSelects(sel, lv any) (bool, error) {
	data, err := json.Marshal(sel)
	if err != nil {
		return false, rego.NewHaltError(fmt.Errorf("selector: %w", err))
	}
	var ls metav1.LabelSelector
	if err := json.Unmarshal(data, &ls); err != nil {
		return false, rego.NewHaltError(fmt.Errorf("selector: not a label selector: %w", err))
	}
	s, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return false, rego.NewHaltError(fmt.Errorf("selector: %w", err))
	}
	m, ok := lv.(map[string]any)
	if !ok {
		return false, rego.NewHaltError(fmt.Errorf("labels: must be an object, got %s", typeName(lv)))
	}
	set := make(labels.Set, len(m))
	for k, v := range m {
		if set[k], ok = v.(string); !ok {
			return false, rego.NewHaltError(fmt.Errorf("labels[%s]: must be a string, got %s", k, typeName(v)))
		}
	}
	return s.Matches(set), nil
}
