package pds

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/gorilla/websocket"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Following through Jetstream (Repo.Jetstream):
//
// On a big shared PDS the commit stream carries every account's commits, of
// which only this repository's are wanted. A Jetstream instance filters at
// the source (wantedDids: this repository; wantedCollections: the six
// app.bulleted ones). Its events carry records as JSON, without the blocks
// or the signed commit, so nothing in them can be verified or taken into
// the kept MST: a Jetstream event of a commit newer than the kept one is a
// bell, and the kept repository is brought forward by a read from the PDS
// (getRepo?since, as a call would), then, as with the PDS's own stream,
// reads cost no request while the connection is live. The cursor (time_us)
// is kept in memory across reconnections (rewound by a few seconds, as
// Jetstream advises); after a restart the connection catches up by a read.

// jetstreamRewind is how far back a reconnection replays Jetstream.
const jetstreamRewind = 5 * time.Second

// jetstreamURL is addr (a Jetstream /subscribe address, ws(s) or http(s))
// filtered to did and the app.bulleted collections.
func jetstreamURL(addr string, did syntax.DID) (string, error) {
	u, err := websocketURL("Jetstream", addr, true)
	if err != nil {
		return "", err
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/subscribe"
	}
	q := u.Query()
	q.Set("wantedDids", did.String())
	q.Del("wantedCollections")
	for _, c := range lexicon.Collections {
		q.Add("wantedCollections", c)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// jetEvent is the part of a Jetstream event that matters here.
type jetEvent struct {
	DID    string `json:"did"`
	TimeUS int64  `json:"time_us"`
	Kind   string `json:"kind"`
	Commit *struct {
		Rev string `json:"rev"`
	} `json:"commit"`
	Account *struct {
		Active bool `json:"active"`
	} `json:"account"`
}

func (r *Repo) jetstreamOnce(ctx context.Context, u string, changed func(), errs func(error)) error {
	r.loadCache(ctx)
	addr := u
	r.mu.Lock()
	cursor := r.stream.seq // Jetstream's time_us
	r.mu.Unlock()
	if cursor > 0 {
		addr += "&cursor=" + strconv.FormatInt(cursor-jetstreamRewind.Microseconds(), 10)
	}
	did := r.did.String()
	return r.listen(ctx, addr, false, changed, errs, func(mt int, rd io.Reader) (func(), error) {
		if mt != websocket.TextMessage && mt != websocket.BinaryMessage {
			return nil, fmt.Errorf("the Jetstream instance sent an unexpected message")
		}
		var ev jetEvent
		if err := json.NewDecoder(rd).Decode(&ev); err != nil {
			return nil, fmt.Errorf("reading Jetstream (compressed frames are not asked for): %w", err)
		}
		if ev.DID != did {
			r.mu.Lock()
			r.stream.seq = max(r.stream.seq, ev.TimeUS)
			r.mu.Unlock()
			return nil, nil // the filter is Jetstream's; this is a second line
		}
		return func() { r.jetstreamEvent(ctx, &ev, changed, errs) }, nil
	})
}

// jetstreamEvent deals with one event of this repository from Jetstream.
func (r *Repo) jetstreamEvent(ctx context.Context, ev *jetEvent, changed func(), errs func(error)) {
	r.mu.Lock()
	r.stream.seq = max(r.stream.seq, ev.TimeUS)
	r.mu.Unlock()
	switch ev.Kind {
	case "commit":
		if ev.Commit == nil || ev.Commit.Rev > r.keptRev() {
			r.resync(ctx, errs) // the blocks come from the PDS
			changed()
		}
	case "identity":
		changed()
	case "account":
		r.account(ctx, ev.Account == nil || ev.Account.Active, errs)
		changed()
	}
}

// keptRev is the rev of the kept repository ("" if none).
func (r *Repo) keptRev() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.car == nil {
		return ""
	}
	return r.car.rev
}
