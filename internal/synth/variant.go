package synth

import "fmt"

// inventions are claims with numbers no document of the corpus makes: what a prompt that
// asks the model to "be specific" makes it invent.
var inventions = []string{
	"This has applied to %d%% of accounts since 2017",
	"About %d%% of users needed a second attempt last quarter",
	"The change took effect after %d days of review",
	"Support resolves %d%% of these cases within one hour",
}

// InventNumbers returns answer with one more sentence that invents a figure and cites the
// first document, which does not say it: the answer of a worse prompt variant. k picks the
// claim and the figure.
func InventNumbers(answer string, k int) string {
	if k < 0 {
		k = -k
	}
	claim := fmt.Sprintf(inventions[k%len(inventions)], 11+(k*37)%80)
	return answer + " " + claim + " [1]."
}
