package pds

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/events"
	"github.com/bluesky-social/indigo/events/schedulers/sequential"
	"github.com/gorilla/websocket"
)

// How news of the repository arrives without a call (Follow):
//
// The PDS's commit stream (com.atproto.sync.subscribeRepos, read with
// indigo's events consumer) is only a bell: a commit event for this
// repository, a #sync, #identity or #account event for it, and every
// (re)connection ring it, and whoever listens reads the repository as any
// call does (getRepo?since through Changes, swapCommit on writes). So
// following makes others' edits reach subscribed clients without a call,
// and can never make a read staler: nothing from the stream is taken into
// the kept state. Not built: applying the stream's commits to the kept
// state (so that reads cost no round trip), verifying them against the
// account's key, and keeping the stream's cursor across restarts; a
// restart rings once, and the read it causes catches up with whatever
// happened meanwhile.

// followLimit bounds one stream message (a commit's blocks are at most
// 2 MB on the network, with headroom).
const followLimit = 4 << 20

// Follow rings changed after each commit of this repository the PDS
// announces on its commit stream (and once after each connection, for
// what may have happened while not connected), until ctx ends. It
// reconnects with backoff (1 s to 1 min); each connection has a handshake
// timeout, a read limit, and pings (indigo's consumer closes it when they
// fail). errs, if set, hears each connection's end.
func (r *Repo) Follow(ctx context.Context, changed func(), errs func(error)) {
	u, err := subscribeURL(r.c.Host)
	if err != nil {
		if errs != nil {
			errs(err)
		}
		return
	}
	did := r.did.String()
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := r.followOnce(ctx, u, did, changed)
		if ctx.Err() != nil {
			return
		}
		if errs != nil {
			errs(err)
		}
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

func (r *Repo) followOnce(ctx context.Context, u, did string, changed func()) error {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment}
	con, resp, err := d.DialContext(ctx, u, http.Header{"User-Agent": []string{"bulleted-mcp"}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return fmt.Errorf("following %s: %w", u, err)
	}
	con.SetReadLimit(followLimit)
	// pongs (to the consumer's pings every 30 s) move the deadline on
	con.SetReadDeadline(time.Now().Add(2 * time.Minute))
	changed() // whatever happened while not connected
	ours := func(repo string) error {
		if repo == did {
			changed()
		}
		return nil
	}
	cb := &events.RepoStreamCallbacks{
		RepoCommit:   func(e *comatproto.SyncSubscribeRepos_Commit) error { return ours(e.Repo) },
		RepoSync:     func(e *comatproto.SyncSubscribeRepos_Sync) error { return ours(e.Did) },
		RepoIdentity: func(e *comatproto.SyncSubscribeRepos_Identity) error { return ours(e.Did) },
		RepoAccount:  func(e *comatproto.SyncSubscribeRepos_Account) error { return ours(e.Did) },
	}
	sched := sequential.NewScheduler("bulleted-follow", cb.EventHandler)
	quiet := slog.New(slog.DiscardHandler)
	return events.HandleRepoStream(ctx, con, sched, quiet)
}

// subscribeURL is the PDS's commit stream as a websocket URL.
func subscribeURL(host string) (string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", fmt.Errorf("following: the PDS address %q: %w", host, err)
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	default:
		return "", fmt.Errorf("following: the PDS address %q is not http(s)", host)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/xrpc/com.atproto.sync.subscribeRepos"
	return u.String(), nil
}
