package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func init() {
	register("version", "print the version", func(_ context.Context, _ []string, stdout, _ io.Writer) int {
		rev := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					rev = " (" + s.Value[:12] + ")"
				}
			}
		}
		fmt.Fprintf(stdout, "ragwatch %s%s %s %s/%s\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	})
}
