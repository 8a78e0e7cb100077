package labelcal

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAPIListsRevertsAndRestores(t *testing.T) {
	ctx := context.Background()
	store := kvStore(t)
	l, err := NewLearner(LearnerOptions{MinLabels: 200, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	get := func() MapsResponse {
		t.Helper()
		w := httptest.NewRecorder()
		l.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/calibration", nil))
		var out MapsResponse
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != http.StatusOK {
			t.Fatalf("GET = %d %s", w.Code, w.Body)
		}
		return out
	}
	if got := get(); got.Maps == nil || len(got.Maps) != 0 {
		t.Fatalf("no maps yet: %+v (want an empty list, not null)", got)
	}
	for _, p := range biased(200, 5) {
		if _, err := l.Observe(ctx, "chat", "faithfulness", p); err != nil {
			t.Fatal(err)
		}
	}
	fitted := get().Maps
	if len(fitted) != 1 || !fitted[0].InUse || fitted[0].Before.MSE <= fitted[0].After.MSE || len(fitted[0].X) == 0 {
		t.Fatalf("maps %+v", fitted)
	}
	post := func(h http.Handler, body string) (int, MapState, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		var m MapState
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, m, w.Body.String()
	}
	for body, want := range map[string]int{
		`{"service":"chat"}`: http.StatusBadRequest,
		`not json`:           http.StatusBadRequest,
		`{"service":"other","metric":"faithfulness"}`:                     http.StatusNotFound,
		`{"service":"chat","metric":"` + strings.Repeat("x", 5000) + `"}`: http.StatusRequestEntityTooLarge,
	} {
		if code, _, msg := post(l.RevertHandler(), body); code != want {
			t.Errorf("revert %.40q = %d %s, want %d", body, code, msg, want)
		}
	}
	code, rev, _ := post(l.RevertHandler(), `{"service":"chat","metric":"faithfulness"}`)
	if code != http.StatusOK || !rev.Reverted || rev.InUse || rev.Version <= fitted[0].Version {
		t.Fatalf("revert = %d %+v", code, rev)
	}
	if m := get().Maps[0]; m.InUse || m.Version != rev.Version {
		t.Errorf("listed after revert %+v", m)
	}
	code, res, _ := post(l.RestoreHandler(), `{"service":"chat","metric":"faithfulness"}`)
	if code != http.StatusOK || res.Reverted || !res.InUse || res.Version <= rev.Version {
		t.Fatalf("restore = %d %+v", code, res)
	}
	if _, v, ok := l.Apply("chat", "faithfulness", 0.125); !ok || v != res.Version {
		t.Errorf("restored map not applied: version %d %v", v, ok)
	}
}
