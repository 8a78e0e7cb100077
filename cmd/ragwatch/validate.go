package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ragwatch/ragwatch/config"
)

func init() {
	register("validate", "check a config file and print every problem", validateCommand)
}

func validateCommand(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var path string
	fs.StringVar(&path, "c", "", "config file (YAML) to check")
	fs.StringVar(&path, "config", "", "same as -c")
	defaults := fs.Bool("defaults", false, "print the built-in defaults as YAML (every key) and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *defaults {
		enc := yaml.NewEncoder(stdout)
		enc.SetIndent(2)
		if err := enc.Encode(config.Default()); err != nil {
			fmt.Fprintf(stderr, "ragwatch validate: %v\n", err)
			return 1
		}
		_ = enc.Close()
		return 0
	}
	if path == "" && fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	if path == "" {
		fmt.Fprintln(stderr, "usage: ragwatch validate -c ragwatch.yaml | ragwatch validate --defaults")
		return 2
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "ragwatch validate: %v\n", err)
		return 1
	}
	c, err := config.Parse(data)
	if err != nil {
		problems := strings.Split(err.Error(), "\n")
		for _, p := range problems {
			fmt.Fprintf(stdout, "%s: %s\n", path, p)
		}
		fmt.Fprintf(stdout, "%d problem%s found\n", len(problems), plural(len(problems)))
		return 1
	}
	for _, w := range config.Deprecations(c) {
		fmt.Fprintf(stdout, "%s: warning: %s\n", path, w)
	}
	fmt.Fprintln(stdout, "config OK")
	return 0
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
