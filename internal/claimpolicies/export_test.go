package claimpolicies

import "sigs.k8s.io/controller-runtime/pkg/client"

// ReadThrough makes s read a policy through r on a miss, as Watch does with
// a cache, without an informer.
func (s *Set) ReadThrough(r client.Reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reader = r
}
