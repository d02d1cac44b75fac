package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"

	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

type hostedFlags struct {
	addr, publicURL, database, dir, plc string
	origins                             []string
	proxies                             []netip.Prefix
	limits                              hosted.Limits
	opts                                server.Options
	confirm                             *tools.ConfirmRules
}

// serveHosted runs the hosted service (serve --database): many users, each
// signed in with OAuth, all shared state in Postgres.
func serveHosted(ctx context.Context, stderr io.Writer, f hostedFlags) int {
	if f.addr == "" || f.publicURL == "" {
		fmt.Fprintln(stderr, "bulleted-mcp: --database needs --http ADDR and --public-url https://HOST")
		return 2
	}
	sealer, err := hosted.SealerFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	db, err := hosted.OpenDB(ctx, f.database)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: database: %v\n", err)
		return 1
	}
	defer db.Close()
	s, err := hosted.New(ctx, hosted.Config{PublicURL: f.publicURL, DB: db, Sealer: sealer, DataDir: f.dir,
		Directory: pds.Directory(f.plc), Server: f.opts, AllowOrigins: f.origins, TrustedProxies: f.proxies, Limits: f.limits, Confirm: f.confirm})
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "bulleted-mcp: hosted on %s (listening on %s), resource %s\n", f.publicURL, ln.Addr(), s.Resource())
	fmt.Fprintf(stderr, "bulleted-mcp: rate limits per client address: %s (%s)\n", f.limits, clientAddrSource(f.proxies))
	// expired authorization requests, codes and tokens: pruned by every
	// instance (in batches the others skip)
	go s.RunPruner(ctx, 0, func(format string, args ...any) {
		fmt.Fprintf(stderr, "bulleted-mcp: "+format+"\n", args...)
	})
	hs := server.NewHTTPServer(s.Handler())
	if err := server.Serve(ctx, hs, ln, shutdownGrace); err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	fmt.Fprintln(stderr, "bulleted-mcp: stopped")
	return 0
}

// clientAddrSource says which address the rate limits count.
func clientAddrSource(proxies []netip.Prefix) string {
	if len(proxies) == 0 {
		return "the connection's remote address; X-Forwarded-For ignored"
	}
	return fmt.Sprintf("X-Forwarded-For from the trusted proxies %v, else the connection's remote address", proxies)
}
