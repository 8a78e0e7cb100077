package alertmanager

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/internal/fixture"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestRealAlertmanager posts to a real Alertmanager (Debian's prometheus-alertmanager) when
// it is installed: the alert is accepted, listed with our labels and annotations, and gone
// from the active list once resolved.
func TestRealAlertmanager(t *testing.T) {
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		if bin, err = exec.LookPath("alertmanager"); err != nil {
			t.Skip("alertmanager not on PATH (apt-get install -y prometheus-alertmanager); the e2e suite covers it in CI")
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "am.yml")
	if err := os.WriteFile(cfg, []byte("route: {receiver: sink}\nreceivers: [{name: sink}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testutil.FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+dir, "--web.listen-address="+addr,
		"--cluster.listen-address=", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://" + addr
	testutil.Eventually(t, 15*time.Second, 20*time.Millisecond, "Alertmanager ready", func() bool {
		r, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})

	n := New(Config{Name: "am", URL: config.Secret(base), RepeatInterval: time.Minute}, nil, nil)
	a := fixture.Alert()
	a.StartsAt = time.Now().Add(-time.Minute)
	if _, err := n.Notify(context.Background(), a); err != nil {
		t.Fatalf("firing: %v", err)
	}
	var got []struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		Status      struct {
			State string `json:"state"`
		} `json:"status"`
	}
	testutil.Eventually(t, 15*time.Second, 20*time.Millisecond, "the firing alert listed", func() bool {
		got = nil
		return getJSON(base+"/api/v2/alerts", &got) == nil && len(got) == 1
	})
	if got[0].Labels["alertname"] != alerts.NameThreshold || got[0].Labels["slo"] != "citation-precision" ||
		got[0].Labels["team"] != "search" || got[0].Annotations["interval"] != "[0.48, 0.56] (95%)" ||
		got[0].Annotations["n"] != "212" || got[0].Status.State != "active" {
		t.Fatalf("alertmanager holds %+v", got[0])
	}
	a.Status, a.EndsAt = alerts.StatusResolved, time.Now()
	if _, err := n.Notify(context.Background(), a); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	testutil.Eventually(t, 15*time.Second, 20*time.Millisecond, "no active alert after resolve", func() bool {
		got = nil
		return getJSON(base+"/api/v2/alerts?active=true", &got) == nil && len(got) == 0
	})
}

func getJSON(url string, v any) error {
	r, err := http.Get(url)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		return fmt.Errorf("HTTP %d", r.StatusCode)
	}
	return json.NewDecoder(r.Body).Decode(v)
}
