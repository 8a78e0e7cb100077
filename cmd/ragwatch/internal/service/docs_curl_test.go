package service_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docCurl is one curl example of the docs: the request and the answer printed under it.
type docCurl struct {
	where   string // file:line
	method  string
	url     string
	headers map[string]string
	body    string
	want    string // the JSON printed after the command ("" when none)
}

// fence is one fenced block of a Markdown file.
type fence struct {
	lang  string
	line  int // of its first line of content
	lines []string
}

// fences lists the fenced blocks of a Markdown text, indented (in a list item) or not.
func fences(text string) []fence {
	var out []fence
	var cur *fence
	for i, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(t, "```"):
			cur = &fence{lang: strings.TrimPrefix(t, "```"), line: i + 2}
		case cur != nil && t == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	return out
}

// TestDocsCurlExamples runs every curl example of docs/ and the README against a running
// ragwatch (the docs' localhost:9465 replaced by the test instance's API address) and checks the
// answer is the one printed under it, JSON for JSON: a docs example that does something else
// than written fails here.
func TestDocsCurlExamples(t *testing.T) {
	files, err := filepath.Glob("../../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../../../README.md")
	var examples []docCurl
	for _, f := range files {
		examples = append(examples, curlExamples(t, f)...)
	}
	if len(examples) < 4 {
		t.Fatalf("found %d curl examples in docs/ and the README; the parser is broken", len(examples))
	}
	e := startEnv(t, testConfig(t))
	for _, ex := range examples {
		t.Run(ex.where, func(t *testing.T) {
			u := regexp.MustCompile(`^(https?://)?(localhost|127\.0\.0\.1):9465`).ReplaceAllString(ex.url, e.base)
			if u == ex.url {
				t.Fatalf("%s: the example calls %s, not the API on localhost:9465", ex.where, ex.url)
			}
			req, err := http.NewRequest(ex.method, u, strings.NewReader(ex.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range ex.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ex.want == "" {
				if resp.StatusCode >= 300 {
					t.Fatalf("%s: HTTP %d %s", ex.where, resp.StatusCode, got)
				}
				return
			}
			if !sameJSON(got, []byte(ex.want)) {
				t.Errorf("%s: answered (HTTP %d)\n%s\nthe docs print\n%s", ex.where, resp.StatusCode, got, ex.want)
			}
		})
	}
}

// curlExamples parses the curl commands of path's shell blocks, with the JSON printed after
// each (bare, or as a `# ` comment).
func curlExamples(t *testing.T, path string) []docCurl {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docCurl
	for _, b := range fences(string(data)) {
		if b.lang != "" && b.lang != "sh" && b.lang != "bash" && b.lang != "console" {
			continue
		}
		startLine, lines := b.line, b.lines
		for i := 0; i < len(lines); i++ {
			l := strings.TrimPrefix(strings.TrimSpace(lines[i]), "$ ")
			if !strings.HasPrefix(l, "curl ") {
				continue
			}
			where := fmt.Sprintf("%s:%d", filepath.Base(path), startLine+i)
			// The command runs on while a quote is open or a line ends with a backslash.
			cmd := l
			for (strings.Count(cmd, "'")%2 == 1 || strings.HasSuffix(cmd, "\\")) && i+1 < len(lines) {
				i++
				cmd = strings.TrimSuffix(cmd, "\\") + "\n" + lines[i]
			}
			ex, err := parseCurl(cmd)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			ex.where = where
			// The answer: the next non-empty line that is not another command.
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !strings.Contains(lines[i+1], "curl ") {
				i++
				ans := strings.TrimPrefix(strings.TrimSpace(lines[i]), "# ")
				if strings.HasPrefix(ans, "{") || strings.HasPrefix(ans, "[") {
					dec := json.NewDecoder(strings.NewReader(ans))
					var v json.RawMessage
					if err := dec.Decode(&v); err == nil {
						ex.want = string(v)
					}
					break
				}
			}
			out = append(out, ex)
		}
	}
	return out
}

// parseCurl reads the curl flags the docs use: -s, -X, -H, -d and the URL, with single-quoted
// arguments.
func parseCurl(cmd string) (docCurl, error) {
	var args []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range cmd {
		switch {
		case r == '\'':
			quoted, any = !quoted, true
		case !quoted && (r == ' ' || r == '\n' || r == '\t' || r == '\\'):
			if any {
				args = append(args, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		args = append(args, cur.String())
	}
	ex := docCurl{method: http.MethodGet, headers: map[string]string{}}
	for i := 1; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("curl %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch a {
		case "-s", "-sS", "-S":
		case "-X":
			ex.method, err = next()
		case "-H":
			var h string
			if h, err = next(); err == nil {
				k, v, _ := strings.Cut(h, ":")
				ex.headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		case "-d", "--data":
			if ex.body, err = next(); err == nil && ex.method == http.MethodGet {
				ex.method = http.MethodPost
			}
		default:
			if strings.HasPrefix(a, "-") {
				return ex, fmt.Errorf("curl flag %s is not understood by the docs test", a)
			}
			ex.url = a
		}
		if err != nil {
			return ex, err
		}
	}
	if ex.url == "" {
		return ex, fmt.Errorf("curl without a URL: %s", cmd)
	}
	if !strings.Contains(ex.url, "://") {
		ex.url = "http://" + ex.url
	}
	return ex, nil
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
