//go:build tools

// Package tools pins promtool, which `make verify` builds into bin/ and runs
// as `promtool check rules` on config/prometheus/rules.yaml.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
