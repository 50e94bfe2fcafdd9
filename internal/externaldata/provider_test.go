package externaldata_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotakeeper/quotakeeper/internal/externaldata"
	"github.com/quotakeeper/quotakeeper/internal/metrics"
)

// Every request the provider answers, a refused one too, is one
// observation of quotakeeper_external_data_request_duration_seconds: the
// latency make load GATEKEEPER=stock reports as the provider's p99.
func TestEveryRequestIsTimedInTheProvidersHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterAdmission(reg); err != nil {
		t.Fatal(err)
	}
	before := providerRequests(t, reg)
	h := externaldata.Handler{}
	for _, body := range []string{
		`{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":["{\"builtin\":\"quota.quantity\",\"args\":[\"1\"]}"]}}`,
		`not json`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, externaldata.Path, strings.NewReader(body)))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, externaldata.Path, nil))
	if got := providerRequests(t, reg) - before; got != 3 {
		t.Fatalf("the histogram counted %d requests, want 3", got)
	}
}

func providerRequests(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "quotakeeper_external_data_request_duration_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no quotakeeper_external_data_request_duration_seconds registered")
	return 0
}
