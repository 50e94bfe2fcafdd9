package ledger

// Limit is the limit the current grants give the bucket, and the
// contributions that make it up, exactly as the next write would record
// them. It reads no store: a controller compares it with a cached bucket to
// learn whether Refresh has anything to do, without a round trip to the
// store for every bucket event.
func (l *Ledger) Limit(key BucketKey) (int64, []GrantContribution, error) {
	return limitFor(l.grants, key)
}
