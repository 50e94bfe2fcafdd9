package managertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/test/testenv"
)

// Env is the control plane the manager runs against in the suites: an
// envtest apiserver with quotakeeper's CRDs and the test stand-ins
// (testenv.TestCRDs), the system namespace, the manager's webhook
// configurations, and what Gatekeeper would have installed before the
// manager starts (no Gatekeeper runs here): the QuotaEntity and
// QuotaClaimPolicy constraint kinds, made from the shipped templates (the
// claim-policy controller writes QuotaClaimPolicy constraints; QuotaBypasses
// relax QuotaEntity ones), and the quotaentity template, which the
// QuotaBypass guard reads to tell a quota constraint from any other.
type Env struct {
	*testenv.Env
	// Webhooks is where Start serves the webhooks the apiserver calls.
	Webhooks *envtest.WebhookInstallOptions
}

// StartEnv sets controller-runtime's logger (errors only, everything with
// QUOTAKEEPER_TEST_LOG set) and starts the control plane. On an error it
// stops whatever it had started.
func StartEnv(ctx context.Context) (_ *Env, err error) {
	level := zapcore.ErrorLevel
	if os.Getenv("QUOTAKEEPER_TEST_LOG") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	te, err := testenv.Start(testenv.TestCRDs())
	if err != nil {
		return nil, err
	}
	e := &Env{Env: te}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Stop())
		}
	}()
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: quotav1alpha1.DefaultSystemNamespace}}); err != nil {
		return nil, err
	}
	if e.Webhooks, err = InstallWebhooks(e.Config); err != nil {
		return nil, err
	}
	for _, name := range []string{"quotaentity", "quotaclaimpolicy"} {
		if _, _, err := testenv.InstallConstraintCRD(ctx, e.Config, name); err != nil {
			return nil, fmt.Errorf("install the %s constraint kind: %w", name, err)
		}
	}
	if err := testenv.InstallTemplateObjects(ctx, e.Config, "quotaentity"); err != nil {
		return nil, fmt.Errorf("install the quotaentity template: %w", err)
	}
	return e, nil
}

// Stop removes the webhook configurations and stops the control plane.
func (e *Env) Stop() error {
	var errs []error
	if e.Webhooks != nil {
		errs = append(errs, e.Webhooks.Cleanup())
	}
	return errors.Join(append(errs, e.Env.Stop())...)
}

// CreateActive creates obj (a registration or a grant) and waits up to
// timeout for the manager to make it Active, with reason, for its
// generation: what a test creating one needs before it goes on.
func CreateActive(t testing.TB, c client.Client, timeout time.Duration, obj quotav1alpha1.ConditionGetter, reason string) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	testenv.WaitCondition(t, c, timeout, obj, quotav1alpha1.ConditionActive, metav1.ConditionTrue, reason)
}

// StartManager runs the manager against e (Start, serving e's webhooks).
func (e *Env) StartManager() (*Run, error) { return Start(e.Config, e.Webhooks) }
