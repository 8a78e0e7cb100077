package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ragwatch/ragwatch/alerts/rules"
	"github.com/ragwatch/ragwatch/config"
)

func init() {
	register("rules", "print Prometheus recording and alerting rules for the configured SLOs", runRules)
}

// labelFlags collects repeated --label k=v.
type labelFlags map[string]string

func (l labelFlags) String() string { return "" }

func (l labelFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	l[k] = v
	return nil
}

func runRules(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var path string
	fs.StringVar(&path, "c", "", "config file (YAML)")
	fs.StringVar(&path, "config", "", "config file (YAML)")
	format := fs.String("format", "plain", "plain (a Prometheus rule file) or operator (a PrometheusRule object)")
	name := fs.String("name", "ragwatch", "operator: metadata.name")
	namespace := fs.String("namespace", "", "operator: metadata.namespace")
	labels := labelFlags{}
	fs.Var(labels, "label", "operator: metadata label key=value (repeatable), e.g. release=kube-prometheus-stack")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *format != "plain" && *format != "operator" {
		fmt.Fprintf(stderr, "ragwatch rules: --format must be plain or operator, got %q\n", *format)
		return 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, "ragwatch rules:", err)
		return 2
	}
	f, err := rules.Generate(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ragwatch rules:", err)
		return 2
	}
	var out []byte
	if *format == "operator" {
		out, err = rules.Operator(f, rules.OperatorOptions{Name: *name, Namespace: *namespace, Labels: labels})
	} else {
		out, err = rules.Plain(f)
	}
	if err != nil {
		fmt.Fprintln(stderr, "ragwatch rules:", err)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}
