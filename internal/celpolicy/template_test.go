package celpolicy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitTemplate(t *testing.T) {
	lit := func(s string) segment { return segment{text: s, written: s} }
	cases := []struct {
		in   string
		want []segment
		err  string
	}{
		{in: "plain", want: []segment{lit("plain")}},
		{in: "{{.trigger.metadata.name}}", want: []segment{{text: "trigger.metadata.name", written: "{{.trigger.metadata.name}}", expr: true}}},
		{in: "q-{{ trigger.metadata.name }}-x", want: []segment{lit("q-"),
			{text: "trigger.metadata.name", written: "{{ trigger.metadata.name }}", expr: true}, lit("-x")}},
		// Braces and string literals inside an expression do not close it.
		{in: `{{ {"a": {"b": "}}"}}["a"]["b"] }}`, want: []segment{{text: `{"a": {"b": "}}"}}["a"]["b"]`, written: `{{ {"a": {"b": "}}"}}["a"]["b"] }}`, expr: true}}},
		{in: `{{ 'it\'s' + """}}""" }}`, want: []segment{{text: `'it\'s' + """}}"""`, written: `{{ 'it\'s' + """}}""" }}`, expr: true}}},
		// A dot before a number is not the leading-dot form.
		{in: "{{ .5 }}", want: []segment{{text: ".5", written: "{{ .5 }}", expr: true}}},
		{in: "a }} b", want: []segment{lit("a }} b")}},
		{in: "{{ 'open }}", err: "string literal 'open }} is not closed"},
		{in: "{{ x", err: "{{ is not closed by }}"},
	}
	for _, tc := range cases {
		got, err := splitTemplate(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(segment{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestProgramsAreCachedByEnvironmentAndExpression(t *testing.T) {
	a, err := grantEnv.compile("trigger.metadata.name == 'cached'")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := grantEnv.compile("trigger.metadata.name == 'cached'")
	c, _ := claimEnv.compile("trigger.metadata.name == 'cached'")
	if a != b {
		t.Error("the same expression compiled twice")
	}
	if a == c {
		t.Error("one program served two environments")
	}
}
