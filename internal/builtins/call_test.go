package builtins_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// Call answers exactly what Rego's call of the same builtin returns against
// the same Env, for each builtin, with JSON arguments as the provider
// decodes them (numbers as json.Number): one decision code for both
// admission modes.
func TestCallAnswersAsRego(t *testing.T) {
	useLedger(t, ledger.Grant{ID: "g", Consumer: teamA, ResourceType: "core/configmaps", Amount: 2})
	claim := `{"id": "uid-1", "object": {"apiGroup": "", "kind": "ConfigMap", "namespace": "team-a", "name": "cm", "uid": "uid-1"},
		"requests": [{"consumer": {"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""}, "resourceType": "core/configmaps", "amount": 1, "dimensions": {}}]}`
	query := `{"consumer": {"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""}, "resourceType": "core/configmaps", "dimensions": {}}`
	for _, tc := range []struct{ builtin, args string }{
		{"quota.reserve", "[" + claim + "]"},
		{"quota.usage", "[" + query + "]"},
		{"quota.over_limit", `["core/configmaps"]`},
		{"quota.quantity", `["1500m", ""]`},
		{"quota.display", `[500, {"baseUnit": "millicores", "displayUnit": "cores", "unitConversionFactor": 1000}]`},
		{"quota.selects", `[{"matchLabels": {"a": "b"}}, {"a": "b"}]`},
		{"quota.pod_resources", `[{"kind": "Pod", "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}}]`},
	} {
		t.Run(tc.builtin, func(t *testing.T) {
			var args []any
			d := json.NewDecoder(strings.NewReader(tc.args))
			d.UseNumber()
			if err := d.Decode(&args); err != nil {
				t.Fatal(err)
			}
			got, err := builtins.Call(context.Background(), process.Load(), tc.builtin, args)
			if err != nil {
				t.Fatal(err)
			}
			// Rego's answer for the same call; a repeated reserve is a
			// replay of the same claim, which answers the same decision.
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(mustEval(t, tc.builtin+"("+strings.TrimSuffix(strings.TrimPrefix(tc.args, "["), "]")+")", nil))
			var g, w any
			_ = json.Unmarshal(gotJSON, &g)
			_ = json.Unmarshal(wantJSON, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("Call(%s) = %s\nRego: %s", tc.builtin, gotJSON, wantJSON)
			}
		})
	}
}

// A halt is a *CallError with the builtin's own message; an unknown builtin
// or a wrong number of arguments too.
func TestCallErrors(t *testing.T) {
	for _, tc := range []struct {
		builtin string
		args    []any
		want    string
	}{
		{"quota.over_limit", []any{"core/configmaps"}, "quota.over_limit: quota is not ready: the plugin has not loaded the ResourceGrants yet (it decides nothing until it has; see docs/troubleshooting.md)"},
		{"quota.quantity", []any{"lots", ""}, `quota.quantity: value: "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{"http.send", []any{map[string]any{}}, "http.send: not a quota builtin"},
		{"quota.usage", nil, "quota.usage: takes 1 arguments, got 0"},
	} {
		_, err := builtins.Call(context.Background(), &builtins.Env{}, tc.builtin, tc.args)
		var ce *builtins.CallError
		if !errors.As(err, &ce) || err.Error() != tc.want {
			t.Errorf("Call(%s): error %v, want *CallError %q", tc.builtin, err, tc.want)
		}
	}
}
