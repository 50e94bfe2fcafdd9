package ledger

import "strings"

// SumPrefix begins the id of a sum: create reservations compacted into one
// amount (stub; the sums branch defines sums).
const SumPrefix = "sum/"

// IsSum reports whether id is a sum's.
func IsSum(id string) bool { return strings.HasPrefix(id, SumPrefix) }
