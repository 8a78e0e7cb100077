package llm

import (
	"encoding/json"
	"testing"
)

// FuzzExpectedScore feeds arbitrary token streams (a backend's logprobs are untrusted): it
// must never panic, and a weighted score must lie on the scale.
func FuzzExpectedScore(f *testing.F) {
	f.Add(`[{"Token":"{\"score\":","Top":null},{"Token":" 4","Top":[{"Token":" 4","Logprob":-0.5},{"Token":"5","Logprob":-1}]}]`)
	f.Add(`[{"Token":"\"score\": ","Top":null}]`)
	f.Add(`[{"Token":"\"score\":"},{"Token":"3","Top":[{"Token":"3","Logprob":1e308},{"Token":"4","Logprob":1e308}]}]`)
	f.Add(`[{"Token":"\"score\":1","Top":[{"Token":"1","Logprob":0}]},{"Token":"0"}]`)
	f.Fuzz(func(t *testing.T, data string) {
		var lps []TokenLogprob
		if json.Unmarshal([]byte(data), &lps) != nil {
			return
		}
		if v, ok := ExpectedScore(lps, 1, 5); ok && !(v >= 1 && v <= 5) {
			t.Fatalf("ExpectedScore = %v outside 1..5 for %s", v, data)
		}
	})
}
