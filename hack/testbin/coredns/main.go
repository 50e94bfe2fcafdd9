// Command coredns is CoreDNS with only the plugins the real-node test bed's
// cluster DNS uses, as CoreDNS documents for a custom build: coremain with
// dnsserver.Directives set to those plugins, in plugin.cfg's order. The bed
// runs it as a pod behind the kube-dns Service (test/nodebed/dns.go).
//
// There is no forward plugin: the bed's pods talk only to this host and the
// cluster, so names outside cluster.local are answered SERVFAIL rather than
// sent to a resolver the pods cannot reach (and without forward, the loop
// plugin has nothing to detect).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins this build knows, in the order plugin.cfg
// gives them (the order a query passes through them).
var directives = []string{
	"ready",
	"health",
	"errors",
	"log",
	"cache",
	"kubernetes",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
