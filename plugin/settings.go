package plugin

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/builtins"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
)

// DefaultSettingsFile is where the plugin looks for its settings: the
// mount point of the quotakeeper-plugin ConfigMap that the quotakeeper
// chart renders and config/gatekeeper/values.yaml mounts into both of
// Gatekeeper's Deployments. Gatekeeper's chart has no value for extra
// command-line flags, so a file is how its users configure the plugin
// without editing the Deployments by hand.
const DefaultSettingsFile = "/etc/quotakeeper/plugin/settings.yaml"

// Settings are the plugin's settings. Each has a flag of the same meaning;
// a flag given on the command line wins over the file, and the file wins
// over the defaults.
type Settings struct {
	// SystemNamespace holds the AllowanceBuckets of consumers that are
	// not namespaces.
	SystemNamespace string `json:"systemNamespace,omitempty"`
	// ReservationTTL is how long an admission reservation holds quota
	// before it expires unless its object appears.
	ReservationTTL metav1.Duration `json:"reservationTTL,omitempty"`
	// Deadline is the longest a quota.reserve call waits for the ledger
	// before it denies; keep it below the webhook's timeoutSeconds.
	Deadline metav1.Duration `json:"deadline,omitempty"`
	// CapacityLeases lets each replica hold a lease of a busy bucket's
	// headroom and admit creates inside it without a synchronous write
	// (docs/architecture.md, "Capacity leases"). On by default; a pointer
	// so that a file's or a flag's false is told from one left out.
	CapacityLeases *bool `json:"capacityLeases,omitempty"`
	// CapacityLeaseShare: a lease is 1/share of a bucket's headroom
	// (default 16).
	CapacityLeaseShare int64 `json:"capacityLeaseShare,omitempty"`
	// CapacityLeaseMinCreates: no lease smaller than this many of the
	// bucket's largest create (default 32); below it the bucket is decided
	// synchronously.
	CapacityLeaseMinCreates int64 `json:"capacityLeaseMinCreates,omitempty"`
}

// LeaseOptions are the ledger's lease options the settings give, for holder.
func (s Settings) LeaseOptions(holder string) ledger.LeaseOptions {
	return ledger.LeaseOptions{Holder: holder, Share: s.CapacityLeaseShare, MinCreates: s.CapacityLeaseMinCreates}
}

// Leased reports whether capacity leases are on (nil: the default, on).
func (s Settings) Leased() bool { return s.CapacityLeases == nil || *s.CapacityLeases }

// DefaultSettings are the settings with neither a file nor flags.
func DefaultSettings() Settings {
	on := true
	return Settings{
		SystemNamespace: quotav1alpha1.DefaultSystemNamespace,
		ReservationTTL:  metav1.Duration{Duration: ledger.DefaultReservationTTL},
		Deadline:        metav1.Duration{Duration: builtins.DefaultDeadline},
		CapacityLeases:  &on,
	}
}

// Flags join Gatekeeper's own command line (it parses the standard flag
// set). Their defaults are empty so that Load can tell a flag given from
// one left out; the help text names the real defaults.
var (
	settingsFile          = flag.String("quota-settings", DefaultSettingsFile, "file of the quotakeeper plugin's settings (YAML: systemNamespace, reservationTTL, deadline); absent, the defaults apply; a flag below wins over the file (quotakeeper)")
	systemNamespaceFlag   = flag.String("quota-system-namespace", "", "namespace holding the AllowanceBuckets of consumers that are not namespaces (quotakeeper; default "+quotav1alpha1.DefaultSystemNamespace+")")
	reservationTTLFlag    = flag.Duration("quota-reservation-ttl", 0, "how long an admission reservation holds quota before it expires unless its object appears (quotakeeper; default "+ledger.DefaultReservationTTL.String()+")")
	leaseShareFlag        = flag.Int64("quota-capacity-lease-share", 0, "with capacity leases, a lease is 1/share of a bucket's headroom (quotakeeper; default 16)")
	leaseMinCreatesFlag   = flag.Int64("quota-capacity-lease-min-creates", 0, "with capacity leases, no lease smaller than this many of the bucket's largest create: the rest of the quota is decided synchronously (quotakeeper; default 32)")
	capacityLeasesFlag    = flag.Bool("quota-capacity-leases", true, "admit creates inside per-replica leases of a bucket's headroom, recorded asynchronously, instead of one synchronous write per batch; =false turns them off (quotakeeper; default on)")
	deadlineFlag          = flag.Duration("quota-deadline", 0, "longest a quota.reserve call waits for the ledger before it denies and undoes what it wrote; keep it below the webhook's timeoutSeconds (quotakeeper; default "+builtins.DefaultDeadline.String()+")")
	errSettingsFileAbsent = errors.New("no such file")
)

// loadSettings reads the settings the command line points at.
func loadSettings() (Settings, string, error) {
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	flags := Settings{SystemNamespace: *systemNamespaceFlag,
		ReservationTTL:     metav1.Duration{Duration: *reservationTTLFlag},
		Deadline:           metav1.Duration{Duration: *deadlineFlag},
		CapacityLeaseShare: *leaseShareFlag, CapacityLeaseMinCreates: *leaseMinCreatesFlag}
	if given["quota-capacity-leases"] {
		flags.CapacityLeases = capacityLeasesFlag
	}
	return LoadSettings(*settingsFile, given["quota-settings"], flags)
}

// LoadSettings returns the defaults, overridden by the file's settings,
// overridden by the non-zero fields of flags; and where the settings came
// from, for the log. A file that was asked for by name must exist (a
// mistyped path must not quietly mean the defaults); the default file may
// be absent. Settings that do not parse or make no sense are an error
// naming the file and the field: the plugin then refuses to start, so
// admission fails closed rather than deciding with settings nobody chose.
func LoadSettings(file string, named bool, flags Settings) (Settings, string, error) {
	s := DefaultSettings()
	source := "defaults"
	fromFile, err := readSettings(file)
	switch {
	case errors.Is(err, errSettingsFileAbsent) && !named:
	case err != nil:
		return Settings{}, "", err
	default:
		source = file
		s = s.merge(fromFile)
	}
	if flags != (Settings{}) {
		source += " and flags"
		s = s.merge(flags)
	}
	if err := s.validate(); err != nil {
		return Settings{}, "", fmt.Errorf("quotakeeper plugin settings (%s): %w", source, err)
	}
	return s, source, nil
}

func readSettings(file string) (Settings, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Settings{}, fmt.Errorf("quotakeeper plugin settings %s: %w", file, errSettingsFileAbsent)
	}
	if err != nil {
		return Settings{}, fmt.Errorf("quotakeeper plugin settings: %w", err)
	}
	var s Settings
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return Settings{}, fmt.Errorf("quotakeeper plugin settings %s: %w", file, err)
	}
	return s, nil
}

// merge returns s with the non-zero fields of over.
func (s Settings) merge(over Settings) Settings {
	if over.SystemNamespace != "" {
		s.SystemNamespace = over.SystemNamespace
	}
	if over.ReservationTTL.Duration != 0 {
		s.ReservationTTL = over.ReservationTTL
	}
	if over.Deadline.Duration != 0 {
		s.Deadline = over.Deadline
	}
	if over.CapacityLeases != nil {
		s.CapacityLeases = over.CapacityLeases
	}
	if over.CapacityLeaseShare != 0 {
		s.CapacityLeaseShare = over.CapacityLeaseShare
	}
	if over.CapacityLeaseMinCreates != 0 {
		s.CapacityLeaseMinCreates = over.CapacityLeaseMinCreates
	}
	return s
}

func (s Settings) validate() error {
	var errs []error
	for _, msg := range validation.IsDNS1123Label(s.SystemNamespace) {
		errs = append(errs, fmt.Errorf("systemNamespace: Invalid value: %q: %s", s.SystemNamespace, msg))
	}
	for _, d := range []struct {
		field string
		value time.Duration
	}{{"reservationTTL", s.ReservationTTL.Duration}, {"deadline", s.Deadline.Duration}} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s: Invalid value: %q: must be positive", d.field, d.value))
		}
	}
	for _, n := range []struct {
		field string
		value int64
	}{{"capacityLeaseShare", s.CapacityLeaseShare}, {"capacityLeaseMinCreates", s.CapacityLeaseMinCreates}} {
		if n.value < 0 {
			errs = append(errs, fmt.Errorf("%s: Invalid value: %d: must not be negative", n.field, n.value))
		}
	}
	if ttl := s.ReservationTTL.Duration; ttl > 0 && ttl < ledger.MinReservationTTL {
		errs = append(errs, fmt.Errorf("reservationTTL: Invalid value: %q: must be at least %s: the longest webhook timeout (30s) plus a margin, "+
			"or a reservation can expire while a slower webhook still holds its request", ttl, ledger.MinReservationTTL))
	}
	if s.Deadline.Duration >= s.ReservationTTL.Duration && s.ReservationTTL.Duration >= ledger.MinReservationTTL {
		errs = append(errs, fmt.Errorf("deadline: Invalid value: %q: must be below reservationTTL (%s)", s.Deadline.Duration, s.ReservationTTL.Duration))
	}
	return errors.Join(errs...)
}
