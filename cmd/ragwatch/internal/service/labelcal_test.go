package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// calibrationState is a series of GET /api/v1/calibration.
type calibrationState struct {
	Service string `json:"service"`
	Metric  string `json:"metric"`
	Version uint64 `json:"version"`
	Labels  int    `json:"labels"`
	Before  struct {
		MSE   float64 `json:"mse"`
		Kappa float64 `json:"kappa"`
	} `json:"before"`
	After struct {
		MSE   float64 `json:"mse"`
		Kappa float64 `json:"kappa"`
	} `json:"after"`
	Applied  bool `json:"applied"`
	Reverted bool `json:"reverted"`
	InUse    bool `json:"in_use"`
}

// recentScore is an entry of GET /api/v1/scores.
type recentScore struct {
	TraceID     string   `json:"trace_id"`
	Metric      string   `json:"metric"`
	Value       float64  `json:"value"`
	Raw         *float64 `json:"raw"`
	Calibration uint64   `json:"calibration"`
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// The builtin rates the unfaithful answer 0.84, nearly as high as the faithful one (0.98).
const faithful, unfaithful = "Paris is the capital of France.", "Lyon is the capital of France."

// sendLabelled hands e a record of trace with answer, carrying label (nil: none), and returns
// its trace id.
func sendLabelled(t *testing.T, e *env, trace int, answer string, label *float64) string {
	t.Helper()
	id := fmt.Sprintf("%032x", trace)
	r := &record.Record{TraceID: id, Service: "chat", Time: time.Now(),
		Query: "What is the capital of France?", Answer: answer,
		Documents: []record.Document{{ID: "d1", Content: "Paris is the capital and largest city of France."}}}
	if label != nil {
		r.Labels = &record.Label{Values: map[string]float64{"faithfulness": *label}, Labeler: "ana"}
	}
	if err := e.app.Records.ConsumeRecord(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return id
}

// recentScoreOf waits for the faithfulness score of trace id in e's GET /api/v1/scores.
func recentScoreOf(t *testing.T, e *env, id string) recentScore {
	t.Helper()
	var got recentScore
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "the score of "+id, func() error {
		var body struct {
			Scores []recentScore `json:"scores"`
		}
		getJSON(t, e.base+"/api/v1/scores?limit=1000", &body)
		for _, s := range body.Scores {
			if s.TraceID == id && s.Metric == "faithfulness" {
				got = s
				return nil
			}
		}
		return fmt.Errorf("%d scores, none of %s", len(body.Scores), id)
	})
	return got
}

// calibrationMaps is e's GET /api/v1/calibration.
func calibrationMaps(t *testing.T, e *env) []calibrationState {
	t.Helper()
	var body struct {
		Maps []calibrationState `json:"maps"`
	}
	getJSON(t, e.base+"/api/v1/calibration", &body)
	return body.Maps
}

// TestCalibrationFromLabels runs the loop through the service: the builtin scorer rates an
// unfaithful answer ("Lyon is the capital of France", 0.84) nearly as high as a faithful one
// (0.98), the team labels them 0 and 1; after min_labels labelled records a map is fitted,
// stored and shown in the API, later builtin scores of the unfaithful answer are mapped toward
// its label (with the raw value and the map's version on the result), a restart loads the map,
// and a revert through the API brings the raw scores back.
func TestCalibrationFromLabels(t *testing.T) {
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 1}
scoring:
  workers: 2
  metrics: [faithfulness]
  builtin:
    calibration: {min_labels: 20, refit_every: 1000}
drift: {detectors: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1"
	ctx := context.Background()
	send := func(e *env, trace int, answer string, label *float64) string {
		return sendLabelled(t, e, trace, answer, label)
	}
	scoreOf := func(e *env, id string) recentScore { return recentScoreOf(t, e, id) }
	maps := func(e *env) []calibrationState { return calibrationMaps(t, e) }

	first := startEnv(t, cfg)
	// Before any label the builtin's own values are published.
	raw := scoreOf(first, send(first, 1000, unfaithful, nil))
	if raw.Raw != nil || raw.Calibration != 0 || raw.Value < 0.7 {
		t.Fatalf("uncalibrated score %+v", raw)
	}
	one, zero := 1.0, 0.0
	for i := range 20 {
		if i%2 == 0 {
			send(first, i+1, faithful, &one)
		} else {
			send(first, i+1, unfaithful, &zero)
		}
	}
	var fitted calibrationState
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, "a map fitted on 20 labels", func() error {
		m := maps(first)
		if len(m) != 1 {
			return fmt.Errorf("%d maps", len(m))
		}
		fitted = m[0]
		return nil
	})
	if fitted.Service != "chat" || fitted.Metric != "faithfulness" || fitted.Version == 0 || fitted.Labels != 20 ||
		!fitted.Applied || !fitted.InUse || fitted.Reverted || !(fitted.After.MSE < fitted.Before.MSE) || !(fitted.After.Kappa > fitted.Before.Kappa) {
		t.Fatalf("fitted %+v", fitted)
	}
	if n := testutil.Sum(t, first.app.Registry, "ragwatch_label_calibration_fits_total", map[string]string{"outcome": "applied"}); n != 1 {
		t.Errorf("applied fits counted %v, want 1", n)
	}
	// A later score of the unfaithful answer moves toward its label, traceably.
	cal := scoreOf(first, send(first, 1001, unfaithful, nil))
	if cal.Raw == nil || *cal.Raw != raw.Value || cal.Calibration != fitted.Version || !(cal.Value < 0.5) {
		t.Fatalf("calibrated score %+v (raw %v)", cal, raw.Value)
	}

	// A restart loads the map from the store and applies it.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := first.app.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	next := startEnv(t, cfg)
	if m := maps(next); len(m) != 1 || m[0].Version != fitted.Version || !m[0].InUse {
		t.Fatalf("after restart: %+v", m)
	}
	if s := scoreOf(next, send(next, 2000, unfaithful, nil)); s.Calibration != fitted.Version || s.Value != cal.Value {
		t.Fatalf("after restart: %+v, want %v by version %d", s, cal.Value, fitted.Version)
	}

	// Revert through the API: a new version, scores back to raw.
	post := func(path, body string) *http.Response {
		t.Helper()
		resp, err := http.Post(next.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post("/api/v1/calibration/revert", `{"service":"chat"}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("revert without a metric = %d", resp.StatusCode)
	}
	if resp := post("/api/v1/calibration/revert", `{"service":"other","metric":"faithfulness"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("revert of an unknown series = %d", resp.StatusCode)
	}
	resp := post("/api/v1/calibration/revert", `{"service":"chat","metric":"faithfulness"}`)
	var reverted calibrationState
	if err := json.NewDecoder(resp.Body).Decode(&reverted); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revert = %d, %v", resp.StatusCode, err)
	}
	if !reverted.Reverted || reverted.InUse || reverted.Version <= fitted.Version {
		t.Fatalf("reverted %+v", reverted)
	}
	if s := scoreOf(next, send(next, 2001, unfaithful, nil)); s.Raw != nil || s.Calibration != 0 || s.Value != raw.Value {
		t.Fatalf("after revert: %+v, want the raw %v", s, raw.Value)
	}
	if m := maps(next); len(m) != 1 || !m[0].Reverted || m[0].Version != reverted.Version {
		t.Fatalf("maps after revert: %+v", m)
	}
}

// TestCalibrationReachesWorkerPods: a sidecar that leaves scoring to a `ragwatch worker` pod.
// The sidecar pairs the pod's builtin scores with the labels and fits the map; the pod, which
// loaded no map at its start, picks the stored version up from the bucket it watches and
// calibrates the later scores it publishes.
func TestCalibrationReachesWorkerPods(t *testing.T) {
	ns := testutil.RunJetStream(t)
	wcfg := workerConfig(ns.ClientURL())
	wcfg.Scoring.Metrics = []string{"faithfulness"}
	wcfg.Scoring.Builtin.Calibration.MinLabels = 20
	startPod(t, wcfg)

	cfg := podSidecarConfig(t, ns.ClientURL())
	cfg.Scoring.Metrics = []string{"faithfulness"}
	cfg.Scoring.Builtin.Calibration.MinLabels = 20
	cfg.Scoring.Builtin.Calibration.RefitEvery = 1000
	car := startEnv(t, cfg)
	raw := recentScoreOf(t, car, sendLabelled(t, car, 1000, unfaithful, nil))
	one, zero := 1.0, 0.0
	for i := range 20 {
		label := &one
		answer := faithful
		if i%2 == 1 {
			label, answer = &zero, unfaithful
		}
		sendLabelled(t, car, i+1, answer, label)
	}
	var version uint64
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, "a map fitted by the sidecar", func() error {
		m := calibrationMaps(t, car)
		if len(m) != 1 || !m[0].InUse {
			return fmt.Errorf("maps %+v", m)
		}
		version = m[0].Version
		return nil
	})
	testutil.CheckFor(t, 15*time.Second, 50*time.Millisecond, "the pod's calibrated score", func() error {
		s := recentScoreOf(t, car, sendLabelled(t, car, 3000+int(time.Now().UnixNano()%1000000), unfaithful, nil))
		if s.Calibration != version || s.Raw == nil || *s.Raw != raw.Value || !(s.Value < 0.5) {
			return fmt.Errorf("score %+v, want version %d applied to raw %v", s, version, raw.Value)
		}
		return nil
	})
}
