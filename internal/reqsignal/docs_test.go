package reqsignal

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// docsTable renders the catalog as docs/metrics-signals.md shows it.
func docsTable() string {
	var b strings.Builder
	b.WriteString("| signal | unit | per request | shown by |\n|---|---|---|---|\n")
	for i := range All {
		s := &All[i]
		shown := "— (no metric)"
		switch {
		case s.Metric == nil:
		case strings.HasPrefix(s.Shows, "stage="):
			shown = fmt.Sprintf("`%s{%s}`", s.Metric.Name, s.Shows)
		case s.Shows != "":
			shown = fmt.Sprintf("`%s`: %s", s.Metric.Name, s.Shows)
		default:
			shown = fmt.Sprintf("`%s`", s.Metric.Name)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Name, s.Unit, s.Help, shown)
	}
	return b.String()
}

// TestDocsTable keeps the catalog table of docs/metrics-signals.md (between the catalog:begin
// and catalog:end comments) what the catalog says.
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics-signals.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	begin, end := strings.Index(doc, "<!-- catalog:begin -->\n"), strings.Index(doc, "<!-- catalog:end -->")
	if begin < 0 || end < begin {
		t.Fatal("docs/metrics-signals.md has no <!-- catalog:begin --> … <!-- catalog:end --> block")
	}
	if got, want := doc[begin+len("<!-- catalog:begin -->\n"):end], docsTable(); got != want {
		t.Errorf("docs/metrics-signals.md's catalog table is stale; between the markers, write:\n%s", want)
	}
}
