// Package cli is the `maestro` command line's client half: push, start,
// list, get, watch, timeline, restart, stop, kill, signal send, events tail
// and trigger preview, against `maestro dev` or the deployed API (SigV4
// signed). It is built on spf13/cobra, for help on every command and shell
// completion; engine/client does the HTTP and decodes the answers.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/maestro-aws/maestro/engine/client"
)

// Exit codes of the command line. Watch exits with the code of the run's
// final status.
const (
	ExitOK        = 0
	ExitError     = 1 // the command failed (bad input, API error, unreachable)
	ExitUsage     = 2 // wrong flags or arguments
	ExitFailed    = 10
	ExitTimedOut  = 11
	ExitStopped   = 12
	ExitUnknown   = 13
	defaultAPIURL = "http://127.0.0.1:8080"
)

// ExitCodeError makes the command exit with Code after printing its
// message (when it has one).
type ExitCodeError struct {
	Code    int
	Message string
}

func (e *ExitCodeError) Error() string { return e.Message }

// Options are what the commands write to and read from.
type Options struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// Extra commands (the server half of the binary: dev, engine, ...).
	Extra []*cobra.Command
	// AWS, when set, is the AWS configuration SigV4 signing uses instead
	// of the standard chain (for programs that embed the commands).
	AWS *aws.Config
}

// app holds the global flags and builds the API client on first use.
type app struct {
	opts   Options
	api    string
	user   string
	sigv4  bool
	region string
	output string
	color  bool
	client *client.Client
}

// NewRoot builds the `maestro` command tree.
func NewRoot(o Options) *cobra.Command {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	a := &app{opts: o, color: colorWanted(o.Stdout, o.Getenv)}
	root := &cobra.Command{
		Use:   "maestro",
		Short: "Maestro on AWS: run the orchestrator, and drive it from the command line",
		Long: `maestro is the one binary of Maestro on AWS: the servers (dev, engine, api, ...)
and a command line for its REST API.

The client commands talk to MAESTRO_API_URL (default ` + defaultAPIURL + `, what
'maestro dev' serves). Against the API deployed on API Gateway, requests are signed
with SigV4 from the standard AWS credential chain (environment, shared config and
credentials files, SSO, container and instance roles): pass --sigv4, or point --api
at an *.execute-api.*.amazonaws.com URL.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetOut(o.Stdout)
	root.SetErr(o.Stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&a.api, "api", envOr(o.Getenv, "MAESTRO_API_URL", defaultAPIURL), "API root URL (env MAESTRO_API_URL)")
	pf.StringVar(&a.user, "user", envOr(o.Getenv, "MAESTRO_USER", o.Getenv("USER")), "caller named in the user header, for maestro dev (env MAESTRO_USER)")
	pf.BoolVar(&a.sigv4, "sigv4", o.Getenv("MAESTRO_SIGV4") == "1", "sign requests with SigV4 for API Gateway (env MAESTRO_SIGV4=1)")
	pf.StringVar(&a.region, "region", "", "AWS region to sign for (default: from the URL or the AWS config)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table or json")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))

	root.AddGroup(&cobra.Group{ID: "client", Title: "Workflows and runs:"}, &cobra.Group{ID: "server", Title: "Servers and tools:"})
	for _, c := range []*cobra.Command{a.pushCmd(), a.startCmd(), a.listCmd(), a.getCmd(), a.watchCmd(), a.timelineCmd(),
		a.restartCmd(), a.actionCmd("stop"), a.actionCmd("kill"), a.signalCmd(), a.eventsCmd(), a.triggerCmd(), a.backfillCmd(), a.watermarkCmd(), a.uiCmd(),
		a.archiveCmd()} {
		c.GroupID = "client"
		root.AddCommand(c)
	}
	for _, c := range o.Extra {
		c.GroupID = "server"
		root.AddCommand(c)
	}
	return root
}

// Run executes args and returns the process exit code.
func Run(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ec *ExitCodeError
	if errors.As(err, &ec) {
		if ec.Message != "" {
			fmt.Fprintln(root.ErrOrStderr(), ec.Message)
		}
		return ec.Code
	}
	fmt.Fprintln(root.ErrOrStderr(), "maestro:", err)
	if isUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// isUsage reports whether err is cobra's complaint about flags or args.
func isUsage(err error) bool {
	m := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "invalid argument", "flag needs"} {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// colorWanted reports whether w is a terminal and NO_COLOR is unset.
func colorWanted(w io.Writer, getenv func(string) string) bool {
	f, ok := w.(*os.File)
	if !ok || getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// tty reports whether stdout is a terminal (live redraws are for people).
func (a *app) tty() bool { return a.color }

// apiClient builds the client from the global flags.
func (a *app) apiClient(ctx context.Context) (*client.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	if a.output != "table" && a.output != "json" {
		return nil, &ExitCodeError{Code: ExitUsage, Message: fmt.Sprintf("maestro: --output must be table or json, got %q", a.output)}
	}
	opts := client.Options{BaseURL: a.api, User: a.user}
	u, err := url.Parse(a.api)
	if err != nil {
		return nil, fmt.Errorf("--api %q: %w", a.api, err)
	}
	region := a.region
	if r := apiGatewayRegion(u.Hostname()); r != "" {
		a.sigv4 = true
		if region == "" {
			region = r
		}
	}
	if a.sigv4 {
		cfg, err := a.awsConfig(ctx, region)
		if err != nil {
			return nil, err
		}
		if cfg.Region == "" {
			return nil, errors.New("--sigv4 needs a region: pass --region or set AWS_REGION")
		}
		opts.Signer = &client.Signer{Credentials: cfg.Credentials, Region: cfg.Region}
	}
	c, err := client.New(opts)
	if err != nil {
		return nil, err
	}
	a.client = c
	return c, nil
}

// awsConfig is Options.AWS or the standard chain's configuration, in
// region when one is named.
func (a *app) awsConfig(ctx context.Context, region string) (aws.Config, error) {
	if a.opts.AWS != nil {
		cfg := a.opts.AWS.Copy()
		if region != "" {
			cfg.Region = region
		}
		return cfg, nil
	}
	var lo []func(*config.LoadOptions) error
	if region != "" {
		lo = append(lo, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
	}
	return cfg, nil
}

// apiGatewayRegion is the region of an API Gateway host name
// (id.execute-api.REGION.amazonaws.com), or "".
func apiGatewayRegion(host string) string {
	parts := strings.Split(host, ".")
	if len(parts) >= 5 && parts[1] == "execute-api" && strings.HasPrefix(strings.Join(parts[3:], "."), "amazonaws.com") {
		return parts[2]
	}
	return ""
}

// json reports whether -o json was asked for.
func (a *app) json() bool { return a.output == "json" }

// printJSON writes raw indented.
func (a *app) printJSON(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		_, err = a.opts.Stdout.Write(append(raw, '\n'))
		return err
	}
	return a.printValue(v)
}

// printValue writes v as indented JSON.
func (a *app) printValue(v any) error {
	enc := json.NewEncoder(a.opts.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printf writes to stdout.
func (a *app) printf(format string, args ...any) { fmt.Fprintf(a.opts.Stdout, format, args...) }
