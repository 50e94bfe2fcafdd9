package localcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
)

// The manager and Gatekeeper run under the RBAC a cluster gives them, not
// as system:masters: the ServiceAccounts, roles and bindings the
// quotakeeper chart renders (config/rbac, and config/gatekeeper/rbac.yaml,
// what the plugin needs beyond Gatekeeper's own), and those Gatekeeper's
// stock chart renders with config/gatekeeper/values.yaml. Each process authenticates as its
// ServiceAccount: a client certificate naming the account's user and groups
// (system:serviceaccount:<ns>:<name>, system:serviceaccounts,
// system:serviceaccounts:<ns>), which the authorizer treats exactly as the
// account's token, and which does not expire under a long `make run`. So a
// permission missing from the chart fails here as it would in a cluster.

// ServiceAccount names a ServiceAccount.
type ServiceAccount struct{ Namespace, Name string }

// UserName is the user the ServiceAccount authenticates as.
func (s ServiceAccount) UserName() string {
	return "system:serviceaccount:" + s.Namespace + ":" + s.Name
}

// Groups are the groups the ServiceAccount authenticates with.
func (s ServiceAccount) Groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
}

// The shipped ServiceAccounts: the chart's (config/rbac/service_account.yaml) and the
// one Gatekeeper's chart runs its Deployments as.
var (
	ManagerServiceAccount    = ServiceAccount{Namespace: "quotakeeper-system", Name: "quotakeeper-manager"}
	GatekeeperServiceAccount = ServiceAccount{Namespace: GatekeeperNamespace, Name: "gatekeeper-admin"}
)

// rbacKinds are the kinds of the RBAC objects the charts render.
var rbacKinds = []string{"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}

// shippedRBAC returns the RBAC objects to install, in order: Gatekeeper's
// stock chart's, then the quotakeeper chart's: the manager's (config/rbac)
// and the plugin's (config/gatekeeper/rbac.yaml); less the charts' hooks'
// (Gatekeeper's install hooks, quotakeeper's uninstall hook), which Helm
// creates only for their phase and deletes once they have run.
func shippedRBAC(gatekeeper, quotakeeper Rendered) []*unstructured.Unstructured {
	return append(gatekeeper.Installed().Kinds(rbacKinds...), quotakeeper.Installed().Kinds(rbacKinds...)...)
}

// Kustomize renders a kustomization with kubectl, as `kubectl apply -k`
// would apply it.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	return renderedBy("kubectl", "kustomize", dir)
}

// installRBAC applies the shipped RBAC.
func (c *Cluster) installRBAC(ctx context.Context) error {
	if err := c.Apply(ctx, time.Minute, shippedRBAC(c.GatekeeperChart, c.Chart)...); err != nil {
		return fmt.Errorf("shipped RBAC: %w", err)
	}
	return nil
}

// WaitAggregated waits until the manager's aggregated ClusterRole holds
// every rule of the ClusterRoles labelled to join it (kube-controller-manager
// aggregates them): after applying such a ClusterRole, before relying on it.
func (c *Cluster) WaitAggregated(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var parts rbacv1.ClusterRoleList
		if last = c.Client.List(ctx, &parts, client.MatchingLabels{dynwatch.AggregateLabel: "true"}); last != nil {
			return false, nil
		}
		var aggregated rbacv1.ClusterRole
		if last = c.Client.Get(ctx, types.NamespacedName{Name: dynwatch.CountedKindsRole}, &aggregated); last != nil {
			return false, nil
		}
		for _, p := range parts.Items {
			for _, r := range p.Rules {
				if !slices.ContainsFunc(aggregated.Rules, func(a rbacv1.PolicyRule) bool { return equalRule(a, r) }) {
					last = fmt.Errorf("ClusterRole %s lacks %s's rule %v", dynwatch.CountedKindsRole, p.Name, r)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return nil
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// writeServiceAccountKubeconfig writes a kubeconfig that authenticates as
// sa, which must exist (the shipped RBAC creates it).
func (c *Cluster) writeServiceAccountKubeconfig(ctx context.Context, file string, sa ServiceAccount) (string, error) {
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: sa.Namespace, Name: sa.Name}, &corev1.ServiceAccount{}); err != nil {
		return "", fmt.Errorf("ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return c.writeUserKubeconfig(file, envtest.User{Name: sa.UserName(), Groups: sa.Groups()})
}

// MetricsReader is the ServiceAccount the bed scrapes the manager's metrics
// as, bound to the chart's quotakeeper-metrics-reader as a Prometheus's is
// (the chart's metrics.readers).
var MetricsReader = ServiceAccount{Namespace: ManagerServiceAccount.Namespace, Name: "quotakeeper-metrics-scraper"}

// metricsReaderToken creates MetricsReader and its binding, and returns a
// token for it: the manager's metrics endpoint authenticates tokens only
// (a TokenReview), not the client certificates the bed's processes use.
func (c *Cluster) metricsReaderToken(ctx context.Context) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: MetricsReader.Namespace, Name: MetricsReader.Name}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsReader.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotakeeper-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, o := range []client.Object{sa, binding} {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("metrics reader: %w", err)
		}
	}
	// A week: longer than any test run or ordinary make run session.
	token, err := ServiceAccountToken(ctx, c.Client, sa, 7*24*time.Hour)
	if err != nil {
		return "", fmt.Errorf("metrics reader: %w", err)
	}
	return token, nil
}

// ServiceAccountToken requests a token for sa valid for ttl (the
// TokenRequest API), as a pod's projected token: what a bearer-token client
// such as Prometheus presents.
func ServiceAccountToken(ctx context.Context, c client.Client, sa *corev1.ServiceAccount, ttl time.Duration) (string, error) {
	expiry := int64(ttl.Seconds())
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return req.Status.Token, nil
}

// metricsSecure says whether the manager's flags serve metrics over HTTPS
// to authorized callers: its default, unless a later flag says false.
func metricsSecure(args []string) bool {
	secure := true
	for _, arg := range args {
		switch arg {
		case "--metrics-secure", "--metrics-secure=true":
			secure = true
		case "--metrics-secure=false":
			secure = false
		}
	}
	return secure
}
