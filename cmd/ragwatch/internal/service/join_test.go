package service_test

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestJoinInputs drives the running app's join through its HTTP API: a label before its
// record rides on it, turns of one session get their number and history, the halves of a
// shadow pair meet, and /metrics counts each under its join.
func TestJoinInputs(t *testing.T) {
	e := startEnv(t, testConfig(t))
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(e.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s = %d %s", path, resp.StatusCode, answer)
		}
	}
	post("/api/v1/labels", `{"trace_id":"00000000000000000000000000000001","values":{"faithfulness":0.25},"labeler":"ann"}`)
	for i, qa := range [][2]string{{"q1", "a1"}, {"q2", "a2"}, {"q3", "a3"}} {
		post("/api/v1/records", `{"trace_id":"0000000000000000000000000000000`+string(rune('1'+i))+`","service":"chat","session_id":"s-1","query":"`+qa[0]+`","answer":"`+qa[1]+`"}`)
		testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "turn "+qa[0], func() bool { return e.sink.len() == i+1 })
	}
	post("/api/v1/records", `[{"trace_id":"000000000000000000000000000000a1","service":"chat","pair_id":"p-1","variant":"control","query":"q","answer":"a"},`+
		`{"trace_id":"000000000000000000000000000000a2","service":"chat","pair_id":"p-1","variant":"candidate","query":"q","answer":"b"}]`)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the pair", func() bool { return e.sink.len() == 5 })

	first := e.sink.get("00000000000000000000000000000001")
	if first == nil || first.Turn != 1 || first.History != nil || !reflect.DeepEqual(first.Labels, &record.Label{Values: map[string]float64{"faithfulness": 0.25}, Labeler: "ann", Time: first.Labels.Time}) {
		t.Fatalf("first turn = %+v", first)
	}
	third := e.sink.get("00000000000000000000000000000003")
	wantHist := []record.Message{{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"}, {Role: "user", Content: "q2"}, {Role: "assistant", Content: "a2"}}
	if third == nil || third.Turn != 3 || !reflect.DeepEqual(third.History, wantHist) {
		t.Fatalf("third turn = %+v", third)
	}
	m := scrape(t, e.base)
	for k, v := range map[string]float64{
		`ragwatch_join_total{join="label",outcome="joined"}`:   1,
		`ragwatch_join_total{join="session",outcome="joined"}`: 2,
		`ragwatch_join_total{join="pair",outcome="joined"}`:    1,
		`ragwatch_join_pending{join="pair"}`:                   0,
		`ragwatch_join_pending{join="session"}`:                1,
		`ragwatch_join_pending{join="label"}`:                  0,
	} {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
}

// TestSessionSurvivesRestart: the running app writes its sessions to the join's bucket when it
// shuts down, and the next app on the same store numbers the conversation's next turn from
// them, with its history.
func TestSessionSurvivesRestart(t *testing.T) {
	cfg := testConfig(t)
	turn := func(e *env, trace, q, a string) *record.Record {
		t.Helper()
		resp, err := http.Post(e.base+"/api/v1/records", "application/json", strings.NewReader(
			`{"trace_id":"`+trace+`","service":"chat","session_id":"s-7","query":"`+q+`","answer":"`+a+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST /api/v1/records = %d", resp.StatusCode)
		}
		var r *record.Record
		testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "record "+trace, func() bool {
			r = e.sink.get(trace)
			return r != nil
		})
		return r
	}
	first := startEnv(t, cfg)
	turn(first, "00000000000000000000000000000b01", "q1", "a1")
	turn(first, "00000000000000000000000000000b02", "q2", "a2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	next := startEnv(t, cfg) // the same store directory
	r := turn(next, "00000000000000000000000000000b03", "q3", "a3")
	want := []record.Message{{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"}, {Role: "user", Content: "q2"}, {Role: "assistant", Content: "a2"}}
	if r.Turn != 3 || !reflect.DeepEqual(r.History, want) {
		t.Fatalf("turn after restart: %d %+v, want 3 %+v", r.Turn, r.History, want)
	}
}
