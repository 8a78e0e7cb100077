package synthrec

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The records are loadgen's turns as ingest makes them: assembled, numbered and given their
// session's history by the join, marked as sampled; the same on every call.
func TestRecords(t *testing.T) {
	recs, err := Records(1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Records(1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1000 || !reflect.DeepEqual(recs, again) {
		t.Fatalf("%d records, same on a second call: %v", len(recs), reflect.DeepEqual(recs, again))
	}
	withHistory, size := 0, 0
	for _, r := range recs {
		if len(r.TraceID) != 32 || r.Service != "support-bot" || r.SessionID == "" || len(r.Documents) != 5 ||
			len(r.Citations) == 0 || r.Attributes["route"] == "" || r.Sampling == nil || r.Sampling.Probability != 0.1 {
			t.Fatalf("record %+v", r)
		}
		if len(r.History) > 0 {
			withHistory++
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		size += len(b)
	}
	// 1,000 turns over synth's 500 sessions: most sessions have had a turn before.
	if withHistory < 500 || withHistory == len(recs) {
		t.Errorf("%d of %d records carry a history", withHistory, len(recs))
	}
	if avg := size / len(recs); avg < 5500 || avg > 7000 {
		t.Errorf("records of %d bytes on average, want about 6 KB (5 documents of 1 KB)", avg)
	}
}
