package controllers

// Serves every controller.

import apierrors "k8s.io/apimachinery/pkg/api/errors"

// ignoreConflict drops a write conflict. A conflict means the cache this
// reconcile read from is behind the object; the event that will bring the
// cache up to date also enqueues the object again, and that reconcile
// decides on the newer state. Returning the conflict as an error would only
// log it and back off.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
