package rego

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// libPackage marks a quota template: its target libs contain this
// library (lib/quota.rego).
const libPackage = "package lib.quota"

// IsQuotaTemplate reports whether a ConstraintTemplate (unstructured) builds
// on lib.quota: a target's libs, or a Rego code entry's source libs, hold
// it. The observer counts only such templates' constraints, and a
// QuotaBypass may relax only them.
func IsQuotaTemplate(u *unstructured.Unstructured) bool {
	targets, _, _ := unstructured.NestedSlice(u.Object, "spec", "targets")
	for _, t := range targets {
		tm, ok := t.(map[string]any)
		if !ok {
			continue
		}
		libs, _, _ := unstructured.NestedStringSlice(tm, "libs")
		code, _, _ := unstructured.NestedSlice(tm, "code")
		for _, c := range code {
			if cm, ok := c.(map[string]any); ok {
				more, _, _ := unstructured.NestedStringSlice(cm, "source", "libs")
				libs = append(libs, more...)
			}
		}
		if slices.ContainsFunc(libs, func(lib string) bool { return strings.Contains(lib, libPackage) }) {
			return true
		}
	}
	return false
}
