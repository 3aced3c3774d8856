package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/maestro-aws/maestro/engine/webui"
	"github.com/spf13/cobra"
)

// uiCmd serves the web UI for the API named by --api on this machine, like
// `kubectl proxy`: the browser talks to 127.0.0.1, which serves the UI's
// pages (engine/webui, built into this binary: the API Lambda carries no
// UI) and sends every other request on to the API, signed with SigV4 from
// the standard credential chain (the deployed API Gateway takes IAM-signed
// requests only).
func (a *app) uiCmd() *cobra.Command {
	var listen string
	var remote bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the web UI of a deployed API on this machine, signing its requests (SigV4)",
		Long: `Serve the web UI for the API named by --api at http://LISTEN/ui/ (the UI is built into
this binary), forwarding every API request to the API and signing it with SigV4 from the
standard AWS credential chain, as the other commands do. A browser cannot sign requests, and the deployed API Gateway takes
signed requests only: this is how people reach the UI of a deployment. It listens on
127.0.0.1 only, unless --allow-remote: anyone who reaches the port acts with your AWS
credentials.`,
		Example: "  maestro ui --api https://abc123.execute-api.us-east-1.amazonaws.com/prod\n  maestro ui --listen 127.0.0.1:9000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			host, _, err := net.SplitHostPort(listen)
			if err != nil {
				return &ExitCodeError{Code: ExitUsage, Message: fmt.Sprintf("maestro ui: --listen %q: %v", listen, err)}
			}
			if ip := net.ParseIP(host); !remote && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
				return &ExitCodeError{Code: ExitUsage, Message: fmt.Sprintf(
					"maestro ui: --listen %s is not a loopback address; requests through it are signed with your credentials (--allow-remote to insist)", listen)}
			}
			c, err := a.apiClient(cmd.Context())
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("maestro ui: %w", err)
			}
			srv := &http.Server{Handler: webui.Local(c.Proxy()), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(a.opts.Stdout, "the web UI of %s: http://%s/ui/ (API reference: http://%s/api/v3/docs); Ctrl-C stops\n",
				c.BaseURL(), ln.Addr(), ln.Addr())
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("maestro ui: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8090", "address to serve the UI on")
	cmd.Flags().BoolVar(&remote, "allow-remote", false, "allow a non-loopback --listen address")
	return cmd
}
