// Package quantities parses Kubernetes quantities from untrusted strings.
//
// apimachinery's resource.ParseQuantity never returns on some decimal
// exponents past int32 ("1e2147483648", "1e-9999999999" spin; FuzzQuantity
// found it). Policies hand quotakeeper any string an object holds, and a
// parse that never returns is an admission that times out, so every parse
// goes through Parse, which bounds the exponent first.
package quantities

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxExponent bounds a quantity's decimal exponent (1e1000). No amount the
// ledger counts needs more: past it every value overflows int64 or rounds
// up to one unit.
const MaxExponent = 1000

// Parse is resource.ParseQuantity, refusing first a decimal exponent beyond
// ±MaxExponent.
func Parse(s string) (resource.Quantity, error) {
	if i := strings.LastIndexAny(s, "eE"); i >= 0 {
		exp := strings.TrimLeft(s[i+1:], "+-")
		if exp != "" && strings.Trim(exp, "0123456789") == "" {
			if n, err := strconv.ParseInt(s[i+1:], 10, 64); err != nil || n > MaxExponent || n < -MaxExponent {
				return resource.Quantity{}, fmt.Errorf("exponent %s out of range (at most ±%d)", s[i+1:], MaxExponent)
			}
		}
	}
	return resource.ParseQuantity(s)
}
