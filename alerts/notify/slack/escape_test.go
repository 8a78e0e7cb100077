package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/alerts/internal/fixture"
)

// TestHostileTextIsEscaped builds a message for an alert whose service name, summary,
// description and evidence come from an attacker (service names arrive with the traces):
// Slack reads <!channel>, <!here>, <@user> and <url|label> in mrkdwn and in the top-level
// text, so every one of them must arrive escaped (&amp; &lt; &gt;, as Slack's formatting
// guide asks) and never as a control sequence.
func TestHostileTextIsEscaped(t *testing.T) {
	a := fixture.Alert()
	a.Service = "<!channel> pay & <http://evil.example|click here>"
	a.Rule = "rule<!here>"
	a.Severity = "page>"
	a.Summary = "SLO broken for <!channel>: <http://evil.example/login|re-authenticate> & <@U0ADMIN>"
	a.Description = "Service <!subteam^S123> <http://evil.example|docs>"
	a.Evidence[0].TraceID = "<http://evil.example|trace>"
	a.Evidence[0].URL = "https://tempo.example/t/x>|<!channel"
	a.RunbookURL = "https://runbooks.example/a|<!here>"

	m := New(Config{}, nil).Message(a)
	var texts []string
	texts = append(texts, m.Text)
	for _, b := range m.Blocks {
		if b.Text != nil && b.Text.Type == "mrkdwn" {
			texts = append(texts, b.Text.Text)
		}
		for _, f := range append(b.Fields, b.Elements...) {
			texts = append(texts, f.Text)
		}
	}
	for _, s := range texts {
		for _, bad := range []string{"<!channel>", "<!here>", "<!subteam", "<@U0ADMIN>", "<http://evil", "|click here>", "|re-authenticate>", "|<!here", ">|<!channel"} {
			if strings.Contains(s, bad) {
				t.Errorf("text %q contains control sequence %q", s, bad)
			}
		}
		// What remains of < and > are the links ragwatch itself writes: <url|label>.
		unescaped := strings.Count(s, "<") + strings.Count(s, ">")
		if unescaped%2 != 0 {
			t.Errorf("text %q has unbalanced angle brackets", s)
		}
	}
	want := "[FIRING] RagwatchSLOViolated rule&lt;!here&gt; (&lt;!channel&gt; pay &amp; &lt;http://evil.example|click here&gt;, page&gt;): " +
		"SLO broken for &lt;!channel&gt;: &lt;http://evil.example/login|re-authenticate&gt; &amp; &lt;@U0ADMIN&gt;"
	if m.Text != want {
		t.Errorf("text\n got %q\nwant %q", m.Text, want)
	}
	body, _ := json.Marshal(m)
	if !strings.Contains(string(body), `\u003chttps://tempo.example/t/x%3E%7C%3C!channel|\u0026lt;http://evil.example|trace\u0026gt;\u003e`) {
		t.Errorf("evidence link not escaped as expected:\n%s", body)
	}
}
