package builtins

import (
	"fmt"
	"regexp"
	"strings"
)

// What a tenant reads when quota cannot decide (the manager or the
// provider down, the plugin's grants not loaded, a bucket write that fails
// or times out, a claim the ledger refuses as invalid): one message in both
// admission modes, in plain words, with what to do. The failure itself
// stays closed: a builtin halts (builtins mode) or answers the reason as a
// string (External Data), and either denies.

// UndecidedFormat frames the reason (%s) a quota check could not decide.
// The External Data lib (package rego) formats its strings with it; the
// plugin rewrites the halts of the builtins linked into Gatekeeper with it
// (Undecided). docs/troubleshooting.md#quota-cannot-decide lists the
// reasons.
const UndecidedFormat = "quota cannot decide: %s; the request is denied and nothing was reserved. Retry in a minute; if it keeps failing, tell your platform team (docs/troubleshooting.md#quota-cannot-decide)"

// UndecidedMessage is UndecidedFormat with reason.
func UndecidedMessage(reason string) string { return fmt.Sprintf(UndecidedFormat, reason) }

// haltText is how OPA prints a quota builtin's halt, which Gatekeeper's
// frameworks driver makes the violation's message: the call's location
// (absent when evaluated without one), OPA's error code, the builtin's name
// and then the builtin's own message.
var haltText = regexp.MustCompile(`(?:libs\["[^"\]]*"\]:\d+: |[^\s:]+\.rego:\d+: )?eval_builtin_error: quota\.[a-z_]+: `)

// Undecided rewrites the halts of quota builtins in a Gatekeeper denial or
// warning ("[<constraint>] <message>", one per line) into UndecidedMessage
// of the builtin's own message, so raw OPA text never reaches a tenant.
// Other lines, and other builtins' errors, are left as they are.
func Undecided(msg string) string {
	if !strings.Contains(msg, "eval_builtin_error: quota.") {
		return msg
	}
	lines := strings.Split(msg, "\n")
	for i, line := range lines {
		loc := haltText.FindStringIndex(line)
		if loc == nil {
			continue
		}
		lines[i] = line[:loc[0]] + UndecidedMessage(line[loc[1]:])
	}
	return strings.Join(lines, "\n")
}
