package reqsignal

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
)

// TestWordsIsFields: Words counts as strings.Fields splits: every ASCII and Unicode space
// separates.
func TestWordsIsFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "word", "é", "\u00a0", "\u0085", "\u2003", " ", "\t", "\n", "\r", "\v", "\f", "\x1c", "x.y", "日本"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := Words(s), len(strings.Fields(s)); got != want {
			t.Fatalf("%q: %d words, want %d", s, got, want)
		}
	}
}

// TestRetrievalNotSeen: a record whose trace showed no retrieval has no value for the
// signals of the retrieval (the catalog both the metrics and the alert engine read), while
// a record without documents that does not say so is an empty retrieval.
func TestRetrievalNotSeen(t *testing.T) {
	notSeen := Measure(&record.Record{TraceID: "t", Answer: "Within 14 days [1].", RetrievalNotSeen: true})
	empty := Measure(&record.Record{TraceID: "t", Answer: "Within 14 days [1]."})
	for _, id := range []ID{RetrievedDocuments, EmptyRetrievalRate, RetrievalScoreTop, RetrievalScoreMean} {
		if v, ok := All[id].Value(&notSeen); ok {
			t.Errorf("%s of a record whose retrieval was not seen = %v, want no value", All[id].Name, v)
		}
	}
	if v, ok := All[EmptyRetrievalRate].Value(&empty); !ok || v != 1 {
		t.Errorf("empty_retrieval_rate of an empty retrieval = %v %v, want 1", v, ok)
	}
	if v, ok := All[AnswerTokens].Value(&notSeen); !ok || v != 4 {
		t.Errorf("answer_tokens of a record whose retrieval was not seen = %v %v, want 4", v, ok)
	}
}
