package nodebed

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cluster DNS, as kubeadm installs it: CoreDNS (our build of it,
// hack/testbin/coredns) in a Deployment of kube-system behind the Service
// kube-dns, whose ClusterIP is the kubelet's clusterDNS. A pod resolves
// quotakeeper-webhook-service.quotakeeper-system.svc through its search
// path, and reaches the address through kube-proxy, as in a cluster.
const (
	// DNSServiceIP is the kube-dns Service's ClusterIP, the kubelet's
	// clusterDNS.
	DNSServiceIP = "10.96.0.10"
	// ClusterDomain is the kubelet's clusterDomain and CoreDNS's zone.
	ClusterDomain = "cluster.local"
	// dnsPort is where CoreDNS listens in its pod: the image runs as
	// 65532, which may not bind 53; the Service maps 53 to it.
	dnsPort = 1053
)

// corefile serves the cluster's zone from the Services and EndpointSlices
// CoreDNS watches. No forward: the bed's pods talk only to this host and
// the cluster, so another name is answered SERVFAIL at once.
var corefile = fmt.Sprintf(`.:%d {
    errors
    health :8080
    ready :8181
    kubernetes %s in-addr.arpa ip6.arpa {
        pods insecure
        ttl 30
    }
    cache 30
}
`, dnsPort, ClusterDomain)

// dnsObjects are the cluster DNS's objects: the ServiceAccount, the
// ClusterRole CoreDNS's kubernetes plugin needs (kubeadm's system:coredns)
// and its binding, the Corefile, the Deployment and the Service.
func dnsObjects(image string) []client.Object {
	const ns, name = "kube-system", "coredns"
	labels := map[string]string{"k8s-app": "kube-dns"}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	config := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string]string{"Corefile": corefile},
	}
	probe := func(path string, port int) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port))}},
			PeriodSeconds: 2,
		}
	}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sa.Name,
					// The host's resolver: CoreDNS must not ask itself.
					DNSPolicy:         corev1.DNSDefault,
					PriorityClassName: "system-cluster-critical",
					Containers: []corev1.Container{{
						Name:            name,
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: dnsPort, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: dnsPort, Protocol: corev1.ProtocolTCP},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
						},
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						LivenessProbe:  probe("/health", 8080),
						ReadinessProbe: probe("/ready", 8181),
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							RunAsNonRoot:             ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: config.Name}},
					}}},
				},
			},
		},
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector:  labels,
			ClusterIP: DNSServiceIP,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("dns-tcp")},
			},
		},
	}
	return []client.Object{sa, role, binding, config, service, deployment}
}

// startDNS creates the cluster DNS's objects and waits until the kubernetes
// Service's name resolves to its ClusterIP through the kube-dns Service,
// asked from the host: kube-proxy's rules carry the query to the CoreDNS
// pod, which answers from its watch of the Services.
func (b *Bed) startDNS(ctx context.Context, image string) error {
	c, err := client.New(b.Config, client.Options{})
	if err != nil {
		return err
	}
	for _, obj := range dnsObjects(image) {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("cluster DNS: %T %s: %w", obj, obj.GetName(), err)
		}
	}
	name := "kubernetes.default.svc." + ClusterDomain
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(DNSServiceIP, "53"))
	}}
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lookup, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := resolver.LookupHost(lookup, name)
		if err != nil {
			last = err
			return false, nil
		}
		if !slices.Contains(addrs, APIServerAddress) {
			last = fmt.Errorf("%s resolved to %v, want %s", name, addrs, APIServerAddress)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster DNS at %s: %w; see %s: %w", DNSServiceIP, last, b.logPath("kube-proxy"), err)
	}
	return nil
}
