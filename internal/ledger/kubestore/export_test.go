package kubestore

// Stats reports status writes and conflicts since the Store was made.
func (s *Store) Stats() (writes, conflicts int64) { return s.writes.Load(), s.conflicts.Load() }

// Queues reports how many buckets have a group-commit queue.
func (s *Store) Queues() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queues)
}
