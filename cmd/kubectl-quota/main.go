// Command kubectl-quota is a kubectl plugin (kubectl finds kubectl-quota on
// PATH and runs it as `kubectl quota`) that shows quotakeeper's quota the way
// a person asks about it: `usage` prints what each consumer that applies
// has used, holds and may still use, in the registration's display units;
// `explain <kind>/<name>` prints what one object counts and against which
// buckets. It takes kubectl's connection flags (-n, --context, --kubeconfig,
// ...) from cli-runtime, so it reaches the cluster kubectl reaches.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/version"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the plugin and returns its exit code; tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, errorLine(err))
	return 1
}

// errorLine words an error as kubectl does, so a NotFound or Forbidden reads
// the same from `kubectl quota` as from `kubectl get`.
func errorLine(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		return fmt.Sprintf("Error from server (%s): %s", status.Status().Reason, err.Error())
	}
	return "error: " + err.Error()
}

// options is what every command shares: the connection (kubectl's flags) and
// where the output goes.
type options struct {
	flags           *genericclioptions.ConfigFlags
	systemNamespace string
	out, errOut     io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), out: stdout, errOut: stderr}
	root := &cobra.Command{
		Use:           "kubectl-quota",
		Short:         "Show quotakeeper quota: usage per consumer, and what an object counts",
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       version.Version,
		// kubectl shows the plugin as `kubectl quota` in help.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl quota"},
	}
	root.SetVersionTemplate(version.String("kubectl-quota") + "\n")
	// cobra's completion command would complete `kubectl-quota`, not
	// `kubectl quota`.
	root.CompletionOptions.DisableDefaultCmd = true
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.systemNamespace, "system-namespace", quotav1alpha1.DefaultSystemNamespace,
		"The namespace of the buckets of consumers that are neither a namespace nor inside one (the manager's --system-namespace)")
	root.AddCommand(newUsageCommand(o), newExplainCommand(o), newDelegationsCommand(o))
	return root
}

// client is a controller-runtime client for quotakeeper's kinds and the core
// kinds, on the connection kubectl's flags describe.
func (o *options) client() (client.Client, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mapper, err := o.flags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
}

// namespace is -n, else the kubeconfig context's namespace, else "default",
// as kubectl picks it.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// printer turns -o into a printer: a table by default and for wide (the wide
// one adds the priority-1 columns), cli-runtime's JSON and YAML printers
// otherwise. Anything else is refused with the formats allowed.
func printer(output string) (printers.ResourcePrinter, error) {
	switch output {
	case "", "wide":
		return printers.NewTablePrinter(printers.PrintOptions{Wide: output == "wide"}), nil
	}
	flags := genericclioptions.NewJSONYamlPrintFlags()
	p, err := flags.ToPrinter(output)
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		allowed := append([]string{"wide"}, flags.AllowedFormats()...)
		return nil, genericclioptions.NoCompatiblePrinterError{OutputFormat: &output, AllowedFormats: allowed}
	}
	return p, err
}

// addOutputFlag adds kubectl's -o flag.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "", "Output format: wide, json or yaml (default: a table in display units)")
}
