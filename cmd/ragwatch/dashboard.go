package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/dashboard"
)

func init() {
	register("dashboard", "print the Grafana dashboard JSON for ragwatch's metrics", func(_ context.Context, _ []string, stdout, stderr io.Writer) int {
		b, err := dashboard.JSON()
		if err != nil {
			fmt.Fprintln(stderr, "dashboard:", err)
			return 1
		}
		_, _ = stdout.Write(b)
		return 0
	})
}
