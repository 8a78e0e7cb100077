package builtin

import (
	"context"
	"math"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
)

// FuzzScore feeds arbitrary text as answer, question, reference and documents: scoring never
// panics, and every value is in [0, 1].
func FuzzScore(f *testing.F) {
	f.Add("The bridge opened in 1937 [1]. Dr. Smith didn't go to the U.S. in 3.5 days; e.g. not.", "When did it open?", "It opened in 1937.", "The bridge opened in 1937. It is red.")
	f.Add("- item one\n2) item two [2, 3] [x]", "who?", "", "...\n\n;;; , and , which")
	f.Add("’n't '' [] [[1]] 1,,2 ..", "", "a", "")
	s := New(Options{})
	f.Fuzz(func(t *testing.T, answer, query, reference, doc string) {
		r := &record.Record{TraceID: "fuzz", Query: query, Answer: answer, Reference: reference,
			Documents: []record.Document{{ID: "1", Content: doc}, {ID: "2", Content: answer + " " + doc}}}
		r.Normalize(r.Time)
		res, err := s.Score(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range res {
			if math.IsNaN(x.Value) || x.Value < 0 || x.Value > 1 {
				t.Fatalf("%s = %v", x.Metric, x.Value)
			}
		}
	})
}
