package kubestore

// Stats reports status writes and conflicts since the Store was made.
func (s *Store) Stats() (writes, conflicts int64) { return s.writes.Load(), s.conflicts.Load() }
