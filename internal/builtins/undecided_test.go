package builtins

import "testing"

func TestUndecidedRewritesQuotaHalts(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			"a denial from the frameworks driver",
			`[configmaps] libs["lib_0"]:612: eval_builtin_error: quota.reserve: quota is not ready: the plugin has not loaded the ResourceGrants yet`,
			`[configmaps] quota cannot decide: quota is not ready: the plugin has not loaded the ResourceGrants yet; the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)`,
		},
		{
			"one line of several",
			"[a] quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 3 (allocated 3, reserved 0)\n" +
				`[b] eval_builtin_error: quota.usage: reading bucket x: bucket store down`,
			"[a] quota exceeded for Namespace team-a: requested 1 of core/configmaps, available 0 of 3 (allocated 3, reserved 0)\n" +
				`[b] quota cannot decide: reading bucket x: bucket store down; the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)`,
		},
		{
			"another builtin's error stays",
			`[c] libs["lib_0"]:3: eval_builtin_error: http.send: connection refused`,
			`[c] libs["lib_0"]:3: eval_builtin_error: http.send: connection refused`,
		},
		{"a plain denial stays", "[d] quota denied: x", "[d] quota denied: x"},
	} {
		if got := Undecided(tc.in); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
