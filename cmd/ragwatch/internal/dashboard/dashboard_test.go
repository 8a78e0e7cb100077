package dashboard

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestCommittedDashboardIsCurrent fails when deploy/grafana/ragwatch-dashboard.json was not
// regenerated after the dashboard code changed: run `go run ./cmd/ragwatch dashboard >
// deploy/grafana/ragwatch-dashboard.json`.
func TestCommittedDashboardIsCurrent(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../../deploy/grafana/ragwatch-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/grafana/ragwatch-dashboard.json is stale: run `go run ./cmd/ragwatch dashboard > deploy/grafana/ragwatch-dashboard.json`")
	}
}

func TestDashboardShape(t *testing.T) {
	b, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	rowsSeen, ids := 0, map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("duplicate panel id %d", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rowsSeen++
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if !strings.Contains(q.Expr, "ragwatch_") {
				t.Errorf("panel %q query %q names no ragwatch metric", p.Title, q.Expr)
			}
		}
	}
	if rowsSeen != 10 {
		t.Errorf("rows = %d, want 10", rowsSeen)
	}
	if n := len(Queries()); n < 25 {
		t.Errorf("queries = %d, want at least 25", n)
	}
}
