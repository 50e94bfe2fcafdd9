// Package usage reads quotakeeper's bucket figures the way a person asks
// about them (per consumer, resource type and dimensions, in the
// registration's display units) and prints them as a kubectl table, and
// the caps parents may hand out with what they have handed out and to whom
// (Delegation). The kubectl plugin (`kubectl quota usage`, `explain`,
// `delegations`) and the live table of `make run` share it, so both show
// the same rows the same way.
package usage
