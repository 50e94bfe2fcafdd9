// Package celpolicy compiles and evaluates the CEL of GrantCreationPolicy and
// ClaimCreationPolicy: conditions (bool) and template strings with {{ expr }}
// segments (string, or an amount), on cel-go with the Kubernetes CEL
// libraries and a cost limit; compiled programs cached by expression.
//
// It is separate because three callers must read a policy alike: the
// validating webhook refuses a policy that does not compile, the status
// controller reports it, and the GrantCreationPolicy controller and the
// ClaimCreationPolicy admission path render it. Compile once per policy
// change, render per trigger.
//
// Variables: trigger (the triggering object) in both kinds, also named
// object in GrantCreationPolicy (seed 002 and Milo's conditions use it);
// user and requestInfo in ClaimCreationPolicy. A variable another kind has
// is an undeclared reference.
package celpolicy
