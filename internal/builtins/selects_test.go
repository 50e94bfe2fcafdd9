package builtins

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func TestSelects(t *testing.T) {
	for _, tc := range []struct {
		selector, labels string
		want             bool
		err              string
	}{
		{`{}`, `{}`, true, ""},
		{`{"matchLabels": {"quota": "counted"}}`, `{"quota": "counted", "app": "web"}`, true, ""},
		{`{"matchLabels": {"quota": "counted"}}`, `{"app": "web"}`, false, ""},
		{`{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]}]}`, `{"tier": "silver"}`, true, ""},
		{`{"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}`, `{"tier": "silver"}`, false, ""},
		{`{"matchExpressions": [{"key": "tier", "operator": "Near", "values": ["x"]}]}`, `{}`, false, `selector: "Near" is not a valid label selector operator`},
		{`{"matchLabels": {"quota": 1}}`, `{}`, false, "selector: not a label selector: json: cannot unmarshal number into Go struct field LabelSelector.matchLabels of type string"},
		{`{}`, `{"app": 3}`, false, "labels[app]: must be a string, got number"},
	} {
		got, err := selectsOf(ast.MustParseTerm(tc.selector), ast.MustParseTerm(tc.labels))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("quota.selects(%s, %s): error %v, want %q", tc.selector, tc.labels, err, tc.err)
			}
			continue
		}
		if err != nil || !got.Equal(ast.BooleanTerm(tc.want)) {
			t.Errorf("quota.selects(%s, %s) = %v, %v; want %v", tc.selector, tc.labels, got, err, tc.want)
		}
	}
}
