package plugin

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quotakeeper/quotakeeper/internal/builtins"
)

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// on and off are the values of Settings.CapacityLeases.
var on, off = ptr.To(true), ptr.To(false)

// Done when: Gatekeeper's Deployments need no hand-edited flags. The chart's
// ConfigMap sets what it sets, the defaults fill the rest, a flag given on
// the command line still wins, and a file that is wrong stops the plugin
// with the file and field named (admission fails closed).
func TestLoadSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// config/gatekeeper/values.yaml mounts the ConfigMap in this directory
	// (localcluster's TestGatekeeperValuesInstallWithTheStockChart).
	if filepath.Dir(DefaultSettingsFile) != "/etc/quotakeeper/plugin" {
		t.Fatalf("DefaultSettingsFile %s is not where the values mount the settings", DefaultSettingsFile)
	}
	chart := write("chart.yaml", "systemNamespace: quota-buckets\nreservationTTL: 5m\ndeadline: 6s\n")
	partial := write("partial.yaml", "deadline: 4s\n")
	absent := filepath.Join(dir, "absent.yaml")

	for _, tc := range []struct {
		name       string
		file       string
		named      bool
		flags      Settings
		want       Settings
		wantSource string
		wantErr    string
	}{{
		name: "no file where the chart would mount it: the defaults", file: absent,
		want: DefaultSettings(), wantSource: "defaults",
	}, {
		name: "the chart's file", file: chart,
		want:       Settings{SystemNamespace: "quota-buckets", ReservationTTL: duration(5 * time.Minute), Deadline: duration(6 * time.Second), CapacityLeases: on},
		wantSource: chart,
	}, {
		name: "a file that sets one thing keeps the other defaults", file: partial,
		want:       Settings{SystemNamespace: "quotakeeper-system", ReservationTTL: duration(2 * time.Minute), Deadline: duration(4 * time.Second), CapacityLeases: on},
		wantSource: partial,
	}, {
		name: "a TTL below the longest webhook timeout is refused", file: write("short-ttl.yaml", "reservationTTL: 8s\n"),
		wantErr: "quotakeeper plugin settings (" + filepath.Join(dir, "short-ttl.yaml") + "): " +
			`reservationTTL: Invalid value: "8s": must be at least 35s: the longest webhook timeout (30s) plus a margin, or a reservation can expire while a slower webhook still holds its request`,
	}, {
		name: "a flag wins over the file", file: chart, flags: Settings{ReservationTTL: duration(time.Minute)},
		want:       Settings{SystemNamespace: "quota-buckets", ReservationTTL: duration(time.Minute), Deadline: duration(6 * time.Second), CapacityLeases: on},
		wantSource: chart + " and flags",
	}, {
		name: "capacity leases tuned by the file and a flag", file: write("leases.yaml", "capacityLeaseShare: 4\n"),
		flags: Settings{CapacityLeaseMinCreates: 2},
		want: Settings{SystemNamespace: "quotakeeper-system", ReservationTTL: duration(2 * time.Minute), Deadline: duration(builtins.DefaultDeadline),
			CapacityLeases: on, CapacityLeaseShare: 4, CapacityLeaseMinCreates: 2},
		wantSource: filepath.Join(dir, "leases.yaml") + " and flags",
	}, {
		name: "capacity leases turned off by the file", file: write("no-leases.yaml", "capacityLeases: false\n"),
		want: Settings{SystemNamespace: "quotakeeper-system", ReservationTTL: duration(2 * time.Minute), Deadline: duration(builtins.DefaultDeadline),
			CapacityLeases: off},
		wantSource: filepath.Join(dir, "no-leases.yaml"),
	}, {
		name: "a flag turns them on again over the file", file: filepath.Join(dir, "no-leases.yaml"), flags: Settings{CapacityLeases: on},
		want: Settings{SystemNamespace: "quotakeeper-system", ReservationTTL: duration(2 * time.Minute), Deadline: duration(builtins.DefaultDeadline),
			CapacityLeases: on},
		wantSource: filepath.Join(dir, "no-leases.yaml") + " and flags",
	}, {
		name: "a negative lease share is refused", file: write("bad-share.yaml", "capacityLeaseShare: -2\n"),
		wantErr: "quotakeeper plugin settings (" + filepath.Join(dir, "bad-share.yaml") + "): capacityLeaseShare: Invalid value: -2: must not be negative",
	}, {
		name: "a file named on the command line must exist", file: absent, named: true,
		wantErr: "quotakeeper plugin settings " + absent + ": no such file",
	}, {
		name: "an unknown key is refused", file: write("typo.yaml", "systemNamespce: x\n"),
		wantErr: "quotakeeper plugin settings " + filepath.Join(dir, "typo.yaml") + `: error unmarshaling JSON: while decoding JSON: json: unknown field "systemNamespce"`,
	}, {
		name: "a duration that does not parse is refused", file: write("bad-duration.yaml", "deadline: soon\n"),
		wantErr: "quotakeeper plugin settings " + filepath.Join(dir, "bad-duration.yaml") + `: error unmarshaling JSON: while decoding JSON: time: invalid duration "soon"`,
	}, {
		name: "every field that makes no sense is named", file: write("bad.yaml", "systemNamespace: Quota_System\nreservationTTL: -1s\n"),
		wantErr: "quotakeeper plugin settings (" + filepath.Join(dir, "bad.yaml") + "): " +
			`systemNamespace: Invalid value: "Quota_System": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')` + "\n" +
			`reservationTTL: Invalid value: "-1s": must be positive`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, source, err := LoadSettings(tc.file, tc.named, tc.flags)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if source != tc.wantSource {
				t.Errorf("source %q, want %q", source, tc.wantSource)
			}
		})
	}
}
