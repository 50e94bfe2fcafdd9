package localcluster

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// isRetriable: the apiserver does not know the kind yet (its discovery lags a
// new CRD), or a webhook is not serving yet.
func isRetriable(err error) bool {
	if apierrors.IsNotFound(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "no matches for kind") || strings.Contains(msg, "failed calling webhook")
}
