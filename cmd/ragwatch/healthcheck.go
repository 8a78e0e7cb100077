package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

func init() {
	register("healthcheck", "probe a running ragwatch's /healthz (for container HEALTHCHECK)", runHealthcheck)
}

// runHealthcheck exists because the container image has no shell or curl.
func runHealthcheck(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:9464/healthz", "health endpoint to probe")
	timeout := fs.Duration("timeout", 3*time.Second, "probe timeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "healthcheck: %s answered %s\n", *url, resp.Status)
		return 1
	}
	return 0
}
