package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// The outline as MCP resources.
//
//   - bulleted://outline is the whole outline; bulleted://outline/KEY the
//     subtree under the bullet KEY (a record key, or the bullet's at:// URI:
//     bulleted://outline/at://DID/app.bulleted.node/KEY, percent-encoded or
//     not).
//   - Each is text/markdown (read_outline's format=markdown), or
//     application/json with ?format=json (read_outline's format=json, with
//     "next" and "notices"). The format is a query, not a second URI: one
//     URI names one subtree, so a subscription, a completion and a resource
//     link name it once whatever the client reads it as (as HTTP content
//     negotiation would); the templates spell the query out (RFC 6570).
//   - A page is at most MaxResourcePage bytes; a cut page ends with the URI
//     of the next (?cursor=…; a Markdown comment, JSON "next", and
//     _meta.next).
const (
	OutlineURI = "bulleted://outline"
	// OutlineTemplate reads pages of the whole outline and its JSON.
	OutlineTemplate = "bulleted://outline{?format,cursor}"
	// NodeTemplate reads a subtree: node is a record key or at:// URI.
	NodeTemplate = "bulleted://outline/{+node}"

	// anyTemplate matches every URI (see register).
	anyTemplate = "{+uri}"

	// MaxResourcePage bounds one page of a resource read.
	MaxResourcePage = 60_000
	// MaxListed bounds the top-level bullets resources/list names.
	MaxListed = 100
	// MaxCompletions bounds one completion/complete answer (the spec's
	// bound); hasMore says when there are more.
	MaxCompletions = 100
	// MaxSubscriptions bounds one session's resource subscriptions, and
	// MaxSubscribedSessions the sessions that hold any.
	MaxSubscriptions      = 100
	MaxSubscribedSessions = 10_000
)

// NodeResourceURI is the resource URI of the subtree under record key key.
func NodeResourceURI(key string) string { return OutlineURI + "/" + key }

// resourceRef is a parsed resource URI.
type resourceRef struct {
	base   string // the URI without its query
	node   string // "" for the whole outline
	json   bool
	cursor string
}

// page is the URI of the page at cursor, in the same format.
func (r resourceRef) page(cursor string) string {
	q := "?"
	if r.json {
		q += "format=json&" // the templates' order (OutlineTemplate matches it)
	}
	return r.base + q + "cursor=" + url.QueryEscape(cursor)
}

func parseResourceURI(uri string) (resourceRef, error) {
	var r resourceRef
	u, err := url.Parse(uri)
	if err != nil {
		return r, fmt.Errorf("not a URI: %v", err)
	}
	if u.Scheme != "bulleted" || u.Host != "outline" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return r, errors.New("not a resource of this server (bulleted://outline or bulleted://outline/KEY)")
	}
	if u.Path != "" && !strings.HasPrefix(u.Path, "/") {
		return r, errors.New("the path must start with /")
	}
	r.node = strings.TrimPrefix(u.Path, "/")
	r.base, _, _ = strings.Cut(uri, "?")
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return r, fmt.Errorf("bad query: %v", err)
	}
	for k := range q {
		if k != "format" && k != "cursor" {
			return r, fmt.Errorf("unknown query parameter %q (known: format=markdown|json, cursor)", k)
		}
	}
	switch q.Get("format") {
	case "", "markdown":
	case "json":
		r.json = true
	default:
		return r, fmt.Errorf("format must be markdown or json, not %q", q.Get("format"))
	}
	r.cursor = q.Get("cursor")
	return r, nil
}

// resourceError is a JSON-RPC error of a resource request: the code, a
// message naming the URI, and data {uri, kind, next}.
type resourceError struct {
	code int
	msg  string
	data map[string]any
}

func (e *resourceError) Error() string { return e.msg }

func (e *resourceError) JSONRPCError() mcp.JSONRPCError {
	return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, Error: mcp.NewJSONRPCErrorDetails(e.code, e.msg, e.data)}
}

// resourceFail is err as a JSON-RPC error for uri: -32602 (invalid
// params) when the URI names something that is not there or is malformed,
// -32603 otherwise, with the engine's error kind.
func resourceFail(uri string, err error) error {
	kind, next := outline.KindName(err), ""
	var oe *outline.Error
	if errors.As(err, &oe) {
		next = oe.Next
	}
	code := mcp.INTERNAL_ERROR
	switch {
	case errors.Is(err, view.ErrCursor):
		kind, code, next = "invalid", mcp.INVALID_PARAMS, "read the URI without cursor to start again"
	case errors.Is(err, outline.ErrNodeNotFound), errors.Is(err, outline.ErrCrossRepo), errors.Is(err, outline.ErrInvalidInput):
		code = mcp.INVALID_PARAMS
	case kind == "error":
		kind = "invalid"
		code = mcp.INVALID_PARAMS
		if next == "" {
			next = "use bulleted://outline or bulleted://outline/KEY (a record key from read_outline, or completion/complete)"
		}
	}
	data := map[string]any{"uri": uri, "kind": kind}
	if next != "" {
		data["next"] = next
	}
	return mcpserver.NewHandlerError(&resourceError{code: code, msg: fmt.Sprintf("resource %s: %v", uri, err), data: data})
}

// resources serves the outline as resources, completes the template's
// node argument, and keeps the sessions' subscriptions.
type resources struct {
	envFor func(ctx context.Context) (*tools.Env, func(), error)
	subs   *Subscriptions
	// store, if set, keeps the sessions' subscriptions for every instance
	// (substore.go); held are the sessions whose GET stream is open here
	mu    sync.Mutex
	store SubscriptionStore
	held  map[string]*heldStream
}

func newResources(env *tools.Env, o Options) *resources {
	r := &resources{subs: o.Subscriptions}
	if r.subs == nil {
		r.subs = NewSubscriptions()
	}
	r.envFor = o.EnvFor
	if r.envFor == nil {
		r.envFor = func(context.Context) (*tools.Env, func(), error) { return env, nil, nil }
	}
	return r
}

// options are the server options resources need: the capabilities
// (resources with subscribe, completions), the completion provider, and
// the hooks (added to hooks, which the server is given) that list the
// top-level bullets and keep subscriptions.
func (r *resources) options(hooks *mcpserver.Hooks) []mcpserver.ServerOption {
	hooks.AddAfterListResources(r.listed)
	hooks.AddAfterListResourceTemplates(func(_ context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		if res != nil {
			res.ResourceTemplates = slices.DeleteFunc(res.ResourceTemplates, func(t mcp.ResourceTemplate) bool {
				return t.URITemplate != nil && t.URITemplate.Raw() == anyTemplate
			})
		}
	})
	hooks.AddOnRequestInitialization(r.checkSubscribe)
	// (with a store, checkSubscribe recorded it there, and the instance
	// holding the session's GET stream has it)
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, m *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		if s := mcpserver.ClientSessionFromContext(ctx); s != nil && r.stored() == nil {
			_ = r.subscribe(ctx, s.SessionID(), m.Params.URI, true)
		}
	})
	hooks.AddAfterUnsubscribe(func(ctx context.Context, _ any, m *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		if s := mcpserver.ClientSessionFromContext(ctx); s != nil && r.stored() == nil {
			r.subs.remove(s.SessionID(), m.Params.URI)
		}
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, s mcpserver.ClientSession) { r.subs.drop(s.SessionID()) })
	// subscriptions/listen (2026-07-28): the stream's resource
	// subscriptions are kept here for as long as it is open (mcp-go keeps
	// them only on sessions that record them, which its transports' are
	// not); one that cannot be kept is left out of the acknowledgement
	hooks.AddBeforeSubscriptionsListen(r.listen)
	hooks.AddAfterSubscriptionsListen(func(ctx context.Context, id any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		r.subs.drop(listenKey(ctx, id))
	})
	hooks.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, _ any, _ error) {
		if method == mcp.MethodSubscriptionsListen {
			r.subs.drop(listenKey(ctx, id))
		}
	})
	return []mcpserver.ServerOption{
		mcpserver.WithResourceCapabilities(true, false),
		mcpserver.WithCompletions(),
		mcpserver.WithResourceCompletionProvider(r),
	}
}

// register adds the outline resource and the templates to s.
func (r *resources) register(s *mcpserver.MCPServer) {
	r.subs.bind(s)
	s.AddResource(mcp.NewResource(OutlineURI, "Outline",
		mcp.WithResourceDescription("The whole outline as Markdown (read_outline format=markdown), paged; ?format=json for JSON. Subscribe to hear when it changes."),
		mcp.WithMIMEType("text/markdown")), r.read)
	s.AddResourceTemplate(mcp.NewResourceTemplate(OutlineTemplate, "Outline page",
		mcp.WithTemplateDescription("A page of the whole outline: format=markdown (default, text/markdown) or json (application/json); cursor from the previous page's next-page URI.")), r.read)
	// every other URI reaches read too, which answers it as one that is
	// not of this server (-32602 with the URI in data, SEP-2164) rather
	// than mcp-go's error without data; templates/list leaves it out
	s.AddResourceTemplate(mcp.NewResourceTemplate(anyTemplate, "Not a resource of this server"), r.read)
	s.AddResourceTemplate(mcp.NewResourceTemplate(NodeTemplate, "Subtree",
		mcp.WithTemplateDescription("The subtree under one bullet: node is its record key (completion/complete finds keys by text) or at:// URI. Markdown; append ?format=json for JSON, ?cursor=… (given at the end of a cut page) for the next page.")), r.read)
}

// read answers resources/read of every URI of this server.
func (r *resources) read(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	ref, err := parseResourceURI(uri)
	if err != nil {
		return nil, resourceFail(uri, err)
	}
	env, done, err := r.envFor(ctx)
	if err != nil {
		return nil, resourceFail(uri, err)
	}
	if done != nil {
		defer done()
	}
	p, err := tools.ReadPage(ctx, env, ref.node, ref.cursor, ref.json, MaxResourcePage, ref.page)
	if err != nil {
		return nil, resourceFail(uri, err)
	}
	// the engine read the repository: what it saw is news to subscribers
	r.subs.CommitSeen(p.Tree)
	meta := map[string]any{"did": p.DID}
	if p.Cursor != "" {
		meta["next"] = ref.page(p.Cursor)
	}
	if len(p.Notices) > 0 {
		meta["notices"] = p.Notices
	}
	mime := "text/markdown"
	if ref.json {
		mime = "application/json"
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mime, Text: p.Text, Meta: meta}}, nil
}

// listed adds the top-level bullets (at most MaxListed, named by their
// text) to a resources/list result, and says on the outline's entry how
// many there are and how many are not listed.
func (r *resources) listed(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
	if res == nil {
		return
	}
	at := slices.IndexFunc(res.Resources, func(x mcp.Resource) bool { return x.URI == OutlineURI })
	note := func(s string) {
		if at >= 0 {
			res.Resources[at].Description += " " + s
		}
	}
	env, done, err := r.envFor(ctx)
	if err != nil {
		note("Its top-level bullets could not be listed: " + err.Error())
		return
	}
	if done != nil {
		defer done()
	}
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		note("Its top-level bullets could not be listed: " + err.Error())
		return
	}
	r.subs.CommitSeen(t)
	if at >= 0 {
		if o := view.OutlineAt(t, nil); o != nil && o.Title != "" {
			res.Resources[at].Title = o.Title
		}
	}
	n := t.Roots.Len()
	for i, it := range t.Roots.All() {
		if i == MaxListed {
			note(fmt.Sprintf("It has %d top-level bullets; the first %d are listed as resources, the other %d are in this resource (or bulleted://outline/KEY by record key).", n, MaxListed, n-MaxListed))
			break
		}
		name, desc := label(t, it), fmt.Sprintf("Top-level bullet ·%s with %d child bullet(s), as Markdown; ?format=json for JSON.", it.Key(), it.Children.Len())
		uri := NodeResourceURI(it.Key())
		if it.Mirror {
			uri, desc = OutlineURI+"/at://"+t.DID.String()+"/app.bulleted.mirror/"+it.Key(), "Top-level mirror ·"+it.Key()+" (read-only), as Markdown."
		}
		res.Resources = append(res.Resources, mcp.NewResource(uri, name, mcp.WithResourceDescription(desc), mcp.WithMIMEType("text/markdown")))
	}
}

// label is a bullet's text as a resource name: one line, at most 80
// characters (a longer text ends with "…").
func label(t *outline.Tree, it *outline.Item) string {
	text := it.Str("text")
	if it.Mirror {
		text = "↪ mirror"
		if u, err := parseAT(it.Str("original")); err == nil && u.did == t.DID.String() {
			if o := t.Nodes.Get(u.rkey); o != nil {
				text = "↪ " + o.Str("text")
			}
		}
	}
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return "(empty bullet ·" + it.Key() + ")"
	}
	if utf8.RuneCountInString(text) > 80 {
		text = string([]rune(text)[:79]) + "…"
	}
	return text
}

// CompleteResourceArgument completes the templates' arguments: node with
// the record keys of bullets whose text (or a word of it) or key starts
// with what was typed, case-insensitively, in outline order (at most MaxCompletions;
// hasMore and total say how many more), format with markdown and json.
func (r *resources) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	out := &mcp.Completion{Values: []string{}}
	if uri != NodeTemplate && uri != OutlineTemplate {
		return out, nil
	}
	prefix := strings.ToLower(strings.TrimSpace(arg.Value))
	switch arg.Name {
	case "format":
		for _, f := range []string{"markdown", "json"} {
			if strings.HasPrefix(f, prefix) {
				out.Values = append(out.Values, f)
			}
		}
		return out, nil
	case "node":
	default:
		return out, nil
	}
	if uri != NodeTemplate {
		return out, nil
	}
	return keyCompletions(ctx, r.envFor, prefix, false, false)
}

// keyCompletions completes a bullet's record key: the keys of bullets
// (mirrors aside) whose text, a word of their text, or key starts with
// prefix (lower case), in outline order, the top-level ones first when
// rootsFirst (at most MaxCompletions; hasMore and total say how many
// more). labelled: a bullet found by its text is "TEXT ·KEY".
func keyCompletions(ctx context.Context, envFor func(context.Context) (*tools.Env, func(), error), prefix string, rootsFirst, labelled bool) (*mcp.Completion, error) {
	out := &mcp.Completion{Values: []string{}}
	env, done, err := envFor(ctx)
	if err != nil {
		return nil, err
	}
	if done != nil {
		defer done()
	}
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		return nil, err
	}
	add := func(it *outline.Item) {
		if it.Mirror {
			return
		}
		text := it.Str("text")
		byText := textMatches(text, prefix)
		if !byText && !strings.HasPrefix(strings.ToLower(it.Key()), prefix) {
			return
		}
		out.Total++
		if len(out.Values) < MaxCompletions {
			v := it.Key()
			if labelled && byText {
				v = sectionValue(text, v)
			}
			out.Values = append(out.Values, v)
		}
	}
	// pre-order: outline order
	stack := t.Roots.AppendTo(nil)
	if rootsFirst {
		for it := range t.Roots.Items() {
			add(it)
		}
		stack = stack[:0]
		for it := range t.Roots.Items() {
			stack = it.Children.AppendTo(stack)
		}
	}
	slices.Reverse(stack)
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range it.Children.Backward() {
			stack = append(stack, c)
		}
		add(it)
	}
	out.HasMore = out.Total > len(out.Values)
	return out, nil
}

// textMatches reports whether what was typed (lower case) starts text or
// one of its words, case-insensitively ("tiles" finds "grout the tiles").
func textMatches(text, typed string) bool {
	if typed == "" {
		return true
	}
	t := strings.ToLower(text)
	if strings.HasPrefix(t, typed) {
		return true
	}
	for i := strings.Index(t, typed); i > 0; {
		r, _ := utf8.DecodeLastRuneInString(t[:i])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return true
		}
		j := strings.Index(t[i+1:], typed)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// sectionValue is a completion value that shows the bullet's text and
// names it by key: "Groceries ·3kabc…" (a prompt's section argument reads
// it back by the key after " ·").
func sectionValue(text, key string) string {
	text = strings.Join(strings.Fields(text), " ")
	return clip(text, 60) + " ·" + key
}

// checkSubscribe refuses a resources/subscribe this server cannot keep
// (a URI not of this server, a bullet that does not exist, a session at
// its bound) before mcp-go acknowledges it: JSON-RPC -32600 with the
// reason and the URI. With a store of subscriptions (substore.go), a
// subscribe or unsubscribe is recorded there first.
func (r *resources) checkSubscribe(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok || !bytes.Contains(raw, []byte("subscribe")) {
		return nil
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			URI  string    `json:"uri"`
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Params.URI == "" {
		return nil
	}
	st := r.stored()
	if mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion()) {
		st = nil // (no sessions: mcp-go answers that the method was removed)
	}
	switch {
	case m.Method == string(mcp.MethodResourcesSubscribe):
	case m.Method == string(mcp.MethodResourcesUnsubscribe) && st != nil:
	default:
		return nil
	}
	s := mcpserver.ClientSessionFromContext(ctx)
	if s == nil {
		return nil
	}
	if m.Method == string(mcp.MethodResourcesUnsubscribe) {
		if err := r.storeSubscription(ctx, st, s.SessionID(), m.Params.URI, "", true); err != nil {
			return fmt.Errorf("resources/unsubscribe %s: %w", m.Params.URI, err)
		}
		return nil
	}
	if len(m.Params.URI) > maxSubscribedURI {
		return fmt.Errorf("resources/subscribe: a URI of %d bytes is longer than this server keeps (%d)", len(m.Params.URI), maxSubscribedURI)
	}
	t, err := r.subscribeTree(ctx, s.SessionID(), m.Params.URI, false)
	if err == nil && st != nil {
		err = r.storeSubscription(ctx, st, s.SessionID(), m.Params.URI, t.Rev, false)
	}
	if err != nil {
		return fmt.Errorf("resources/subscribe %s: %w", m.Params.URI, err)
	}
	return nil
}

// maxSubscribedURI bounds the URI of a subscription.
const maxSubscribedURI = 2048

// subscribe checks (keep false) or records (keep true) a session's
// subscription to uri (checked again when kept).
func (r *resources) subscribe(ctx context.Context, session, uri string, keep bool) error {
	_, err := r.subscribeTree(ctx, session, uri, keep)
	return err
}

// subscribeTree is subscribe, returning the tree the subscription starts
// from.
func (r *resources) subscribeTree(ctx context.Context, session, uri string, keep bool) (*outline.Tree, error) {
	ref, err := parseResourceURI(uri)
	if err != nil {
		return nil, err
	}
	env, done, err := r.envFor(ctx)
	if err != nil {
		return nil, err
	}
	if done != nil {
		defer done()
	}
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		return nil, err
	}
	id := ""
	if ref.node != "" {
		it, err := t.Resolve(ref.node)
		if err != nil {
			return nil, err
		}
		id = itemID(it)
	}
	return t, r.subs.add(session, uri, t, id, keep)
}

// listenKey names the subscriptions of one subscriptions/listen stream.
func listenKey(ctx context.Context, id any) string {
	return fmt.Sprintf("listen %p %v", mcpserver.ClientSessionFromContext(ctx), id)
}

// listen keeps the resource subscriptions of a subscriptions/listen
// stream, delivered on the stream (tagged with its subscription ID); the
// URIs that cannot be kept (not of this server, no such bullet, over the
// bound) are taken out of the request, so that the acknowledgement does
// not name them.
func (r *resources) listen(ctx context.Context, id any, m *mcp.SubscriptionsListenRequest) {
	uris := m.Params.Notifications.ResourceSubscriptions
	session := mcpserver.ClientSessionFromContext(ctx)
	if len(uris) == 0 || session == nil || id == nil {
		return
	}
	key := listenKey(ctx, id)
	r.subs.setSender(key, func(uri string) error {
		n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
			Method: mcp.MethodNotificationResourceUpdated,
			Params: mcp.NotificationParams{Meta: map[string]any{mcp.MetaKeySubscriptionID: id}, AdditionalFields: map[string]any{"uri": uri}},
		}}
		select {
		case session.NotificationChannel() <- n:
			return nil
		default:
			return mcpserver.ErrNotificationChannelBlocked
		}
	})
	var kept []string
	for _, uri := range uris {
		if r.subscribe(ctx, key, uri, true) == nil {
			kept = append(kept, uri)
		}
	}
	m.Params.Notifications.ResourceSubscriptions = kept
	if len(kept) == 0 {
		r.subs.drop(key)
	}
}

// seen passes the tree env's engine has now to the subscriptions, when
// any session subscribes to env's repository (so a write through this
// server notifies; with no subscriptions it costs nothing).
func (r *resources) seen(ctx context.Context, env *tools.Env) {
	if r == nil || env == nil || env.Engine == nil || !r.subs.watching(env.Engine.Repo.DID().String()) {
		return
	}
	if t, err := env.Engine.Tree(ctx); err == nil {
		r.subs.CommitSeen(t)
	}
}

type atRef struct{ did, coll, rkey string }

func parseAT(s string) (atRef, error) {
	rest, ok := strings.CutPrefix(s, "at://")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 {
		return atRef{}, fmt.Errorf("%q is not an at:// record URI", s)
	}
	return atRef{parts[0], parts[1], parts[2]}, nil
}

func itemID(it *outline.Item) string {
	if it.Mirror {
		return "m/" + it.Key()
	}
	return "n/" + it.Key()
}
