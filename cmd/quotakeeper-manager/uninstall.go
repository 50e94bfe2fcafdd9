package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/dynwatch"
	"github.com/quotakeeper/quotakeeper/internal/uninstall"
)

// runUninstall is `quotakeeper-manager uninstall`, the chart's pre-delete
// hook (package uninstall says what it removes, and in which order). It
// runs in the manager's image so the chart needs no other.
func runUninstall(args []string) error {
	fs := flag.NewFlagSet("quotakeeper-manager uninstall", flag.ContinueOnError)
	var o uninstall.Options
	fs.StringVar(&o.Namespace, "namespace", "", "The release namespace: the manager's Deployment, webhook certificate Secret and leader-election Lease (required).")
	fs.StringVar(&o.SystemNamespace, "system-namespace", "", "The manager's --system-namespace, which holds the counted-policies ConfigMap; default --namespace.")
	fs.StringVar(&o.Deployment, "deployment", "quotakeeper-manager", "The manager's Deployment.")
	fs.StringVar(&o.ValidatingWebhookConfiguration, "validating-webhook-configuration", "quotakeeper-validating-webhook-configuration", "The manager's ValidatingWebhookConfiguration.")
	fs.StringVar(&o.MutatingWebhookConfiguration, "mutating-webhook-configuration", "quotakeeper-mutating-webhook-configuration", "The manager's MutatingWebhookConfiguration.")
	fs.StringVar(&o.WebhookSecret, "webhook-secret-name", "quotakeeper-webhook-server-cert", "The Secret the manager keeps the webhook certificate in.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "quotakeeper-manager.quota.miloapis.com", "The manager's leader-election Lease.")
	fs.StringVar(&o.CountedKindsRole, "counted-kinds-role", dynwatch.CountedKindsRole, "The aggregated ClusterRole of the kinds the manager counts, deleted before Helm deletes the roles it aggregates; empty: kept.")
	fs.DurationVar(&o.PodsGoneTimeout, "pods-gone-timeout", 2*time.Minute, "Longest wait for the manager's pods to end.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Namespace == "" {
		return errors.New("--namespace is required")
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = o.Namespace
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	o.Log = ctrl.Log.WithName("uninstall")

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), quotav1alpha1.AddToScheme(scheme)); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctrl.SetupSignalHandler(), o.PodsGoneTimeout+5*time.Minute)
	defer cancel()
	return uninstall.Run(ctx, c, o)
}

// uninstallCommand runs the uninstall subcommand when it is the first
// argument, and exits.
func uninstallCommand() {
	if len(os.Args) < 2 || os.Args[1] != "uninstall" {
		return
	}
	if err := runUninstall(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "quotakeeper-manager uninstall:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
