package score

import "testing"

func TestKnownMetric(t *testing.T) {
	for metric, want := range map[string]bool{
		Faithfulness: true, RubricCitationQuality: true, MRR: true,
		"precision@3": true, "recall@1": true, "ndcg@10": true, "hit@1000": true,
		"precision@0": false, "ndcg@1001": false, "recall@03": false, "hit@+1": false, "precision@": false,
		"": false, "made_up": false, SignalNegativeFeedbackRate: false, "faithfulness ": false,
	} {
		if got := KnownMetric(metric); got != want {
			t.Errorf("KnownMetric(%q) = %v, want %v", metric, got, want)
		}
	}
}

func TestTurnBucket(t *testing.T) {
	for turn, want := range map[int]string{-1: "", 0: "", 1: "1", 2: "2", 3: "3-5", 5: "3-5", 6: "6+", 40: "6+"} {
		if got := TurnBucket(turn); got != want {
			t.Errorf("TurnBucket(%d) = %q, want %q", turn, got, want)
		}
	}
	if !KnownMetric(RefusalCorrect) {
		t.Error("refusal_correct is not a known metric")
	}
}
