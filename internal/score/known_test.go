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
