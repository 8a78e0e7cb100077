package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

func init() {
	register("export", "export a stratified, redacted evaluation set from a running ragwatch (GET /api/v1/export)", runExport)
}

// runExport fetches an evaluation set from a running ragwatch's API and writes it as JSONL
// (records `ragwatch eval` reads). Exit codes: 0 written, 1 the server failed or refused,
// 2 bad flags or files.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:9465", "the API listener of the running ragwatch (http.api_endpoint)")
	output := fs.String("output", "", "write the records here (JSONL); - for stdout")
	size := fs.Int("size", 500, "records in the set, shared among service/variant/score-band strata")
	since := fs.String("since", "", "only records since: a duration back from now (24h) or an RFC 3339 time")
	tokenEnv := fs.String("token-env", "RAGWATCH_API_TOKEN", "environment variable holding the API bearer token, if the API requires one")
	timeout := fs.Duration("timeout", time.Minute, "request timeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "ragwatch export: "+format+"\n", a...)
		return code
	}
	if *output == "" {
		return fail(2, "--output is required")
	}
	if *size < 1 {
		return fail(2, "--size must be positive, got %d", *size)
	}
	u, err := url.Parse(strings.TrimRight(*base, "/") + "/api/v1/export")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail(2, "--url must be an http(s) URL, got %q", *base)
	}
	q := url.Values{"size": {strconv.Itoa(*size)}}
	if *since != "" {
		q.Set("since", *since)
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail(2, "%v", err)
	}
	if tok := os.Getenv(*tokenEnv); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(1, "%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		hint := ""
		if resp.StatusCode == http.StatusNotFound {
			hint = " (is export.enabled set in the running ragwatch's config?)"
		}
		return fail(1, "%s: %s%s", resp.Status, strings.TrimSpace(string(body)), hint)
	}
	out := io.Writer(stdout)
	var f *os.File
	if *output != "-" {
		if f, err = createPrivate(*output); err != nil {
			return fail(2, "%v", err)
		}
		out = f
	}
	w := bufio.NewWriter(out)
	strata := map[string]int{}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var l struct {
			Stratum string `json:"stratum"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fail(1, "line %d of the response is not JSON: %v", n+1, err)
		}
		strata[l.Stratum]++
		n++
		w.Write(sc.Bytes())
		w.WriteByte('\n')
	}
	err = sc.Err()
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	if *output != "-" {
		names := make([]string, 0, len(strata))
		for s := range strata {
			names = append(names, s)
		}
		sort.Strings(names)
		fmt.Fprintf(stdout, "%d records in %d strata written to %s\n", n, len(strata), *output)
		for _, s := range names {
			fmt.Fprintf(stdout, "  %-40s %d\n", s, strata[s])
		}
	}
	return 0
}
