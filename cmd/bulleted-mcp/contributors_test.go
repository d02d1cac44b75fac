package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// Contributors on the reference PDS, two real accounts, through the tools
// over the PDS backend (openBackend, as serve does). The owner titles a
// subtree with an app.bulleted.outline record that lists the friend as a
// contributor; the friend writes bullets in the friend's own repository
// whose parent is the owner's bullet (and one under a bullet of the owner
// that does not admit the friend).
//
//   - the owner's read_outline shows the friend's bullets in place, marked
//     with their author and read-only, never as detached; the one not
//     admitted is not shown;
//   - the friend's list_detached lists the admitted bullet as a
//     contribution, without a re-attach hint, and only the other as
//     detached;
//   - the friend's agent cannot move the contribution out of the shared
//     outline (move_node to the top or under one of its own bullets,
//     directly, as a dry run, or inside apply_batch): a typed error, and the
//     friend's repository, read back with listRecords, is unchanged;
//   - it can reorder its contributions within the shared bullet (after one
//     of the owner's bullets, or last): only their sortKeys change, the
//     owner's repository is untouched, and the owner's outline shows the
//     new order;
//   - the owner's agent cannot edit, tick, move or delete the friend's
//     bullets: typed errors, and neither repository changes.
func TestContributorsOnPDS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	srv := pdstest.Start(t, pdstest.Options{})
	ctx := context.Background()
	owner, err := srv.CreateAccount(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	friend, err := srv.CreateAccount(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	open := func(a *pdstest.Account) *tools.Env {
		t.Helper()
		t.Setenv(pds.PasswordEnv, a.AppPassword)
		pdsURL, ident, plc := srv.URL, a.Handle, srv.PLCURL
		b, err := openBackend(ctx, t.TempDir(), remoteFlags{pds: &pdsURL, identifier: &ident, plc: &plc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.close)
		if b.env.Engine.Others() == nil {
			t.Fatal("the PDS backend reads no other repositories")
		}
		return b.env
	}
	ownerEnv, friendEnv := open(owner), open(friend)

	call := func(env *tools.Env, name, args string) *mcp.CallToolResult {
		t.Helper()
		res, err := callTool(ctx, env, name, args)
		if err != nil {
			t.Fatalf("%s %s: %v", name, args, err)
		}
		return res
	}
	text := resultText
	ok := func(env *tools.Env, name, args string, out any) string {
		t.Helper()
		res := call(env, name, args)
		if res.IsError {
			t.Fatalf("%s %s: %s", name, args, text(res))
		}
		if out != nil {
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatal(err)
			}
		}
		return text(res)
	}
	// refused: an error result with a kind, and nothing written to either
	// repository (read back through the PDS itself, not through the tool)
	refused := func(env *tools.Env, kind, name, args string) {
		t.Helper()
		before := [2][]pdstest.Record{records(t, srv, owner.DID), records(t, srv, friend.DID)}
		res := call(env, name, args)
		var out struct {
			Error struct{ Kind, Message string }
		}
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &out)
		if !res.IsError || out.Error.Kind != kind {
			t.Fatalf("%s %s: want a %s error, got (isError %t, kind %q) %s", name, args, kind, res.IsError, out.Error.Kind, text(res))
		}
		t.Logf("%s %s refused: %s", name, args, text(res))
		after := [2][]pdstest.Record{records(t, srv, owner.DID), records(t, srv, friend.DID)}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("%s %s was refused but the repositories changed:\nbefore %v\nafter  %v", name, args, before, after)
		}
	}

	// the owner's outline: a shared subtree and a private bullet
	var w tools.WriteResult
	ok(ownerEnv, "insert_after", `{"nodes":[{"text":"Team plan","children":[{"text":"Owner's first step"}]},{"text":"Private list"}]}`, &w)
	keys := map[string]string{}
	for _, c := range w.Created {
		keys[c.Input] = c.RKey
	}
	team, step, private := keys["nodes[0]"], keys["nodes[0].children[0]"], keys["nodes[1]"]
	if team == "" || step == "" || private == "" {
		t.Fatalf("created %+v", w.Created)
	}
	nodeURI := func(did syntax.DID, rkey string) string { return "at://" + did.String() + "/app.bulleted.node/" + rkey }
	oc := otherApp(t, srv, owner)
	if err := oc.Post(ctx, "com.atproto.repo.putRecord", map[string]any{"repo": owner.DID.String(), "collection": "app.bulleted.outline", "rkey": team,
		"record": map[string]any{"$type": "app.bulleted.outline", "root": nodeURI(owner.DID, team), "title": "Team plan",
			"contributors": []any{map[string]any{"did": friend.DID.String()}}, "createdAt": stamp()}}, nil); err != nil {
		t.Fatal(err)
	}
	var stepSortKey string
	for _, r := range records(t, srv, owner.DID) {
		if r.Collection == "app.bulleted.node" && r.RKey == step {
			stepSortKey, _ = r.Value["sortKey"].(string)
		}
	}
	if stepSortKey == "" {
		t.Fatal("the owner's bullet has no sortKey on the PDS")
	}

	// the friend's bullets, in the friend's repository: one under the
	// owner's shared bullet (after the owner's child), a child of it, and
	// one under the owner's private bullet
	fc := otherApp(t, srv, friend)
	create := func(text, parent, sortKey string) string {
		t.Helper()
		var out struct{ URI string }
		if err := fc.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": friend.DID.String(), "collection": "app.bulleted.node",
			"record": map[string]any{"$type": "app.bulleted.node", "text": text, "parent": parent, "sortKey": sortKey, "createdAt": stamp()}}, &out); err != nil {
			t.Fatal(err)
		}
		u, err := syntax.ParseATURI(out.URI)
		if err != nil {
			t.Fatal(err)
		}
		return u.RecordKey().String()
	}
	idea := create("Friend's idea", nodeURI(owner.DID, team), stepSortKey+"V")
	detail := create("Friend's detail", nodeURI(friend.DID, idea), "a0")
	stray := create("Friend's stray thought", nodeURI(owner.DID, private), "a0")
	// and one of the friend's own bullets, through the friend's agent
	var fw tools.WriteResult
	ok(friendEnv, "insert_after", `{"text":"Friend's own list"}`, &fw)
	own := fw.Created[0].RKey

	// the owner reads the shared outline: the friend's bullets in place,
	// by their author, read-only
	got := ok(ownerEnv, "read_outline", `{}`, nil)
	by := " [by " + friend.DID.String() + ", read-only]"
	want := "- Team plan ·" + team + "\n" +
		"  - Owner's first step ·" + step + "\n" +
		"  - Friend's idea" + by + " ·" + idea + "\n" +
		"    - Friend's detail" + by + " ·" + detail + "\n" +
		"- Private list ·" + private + "\n"
	if !strings.HasPrefix(got, want) || strings.Contains(got, "stray") || strings.Contains(got, "Note:") || strings.Contains(strings.ToLower(got), "detached") {
		t.Fatalf("the owner's outline:\n%s\nwant\n%s", got, want)
	}
	var page struct {
		Nodes []*struct {
			RKey, DID, Author, Detached, Parent string
			ReadOnly                            bool
			Children                            []*struct {
				RKey, DID, Author, Detached, Parent string
				ReadOnly                            bool
				Children                            []*struct {
					RKey, DID, Author, Detached string
					ReadOnly                    bool
				}
			}
		}
	}
	ok(ownerEnv, "read_outline", `{"format":"json","fields":"full"}`, &page)
	if len(page.Nodes) != 2 || len(page.Nodes[0].Children) != 2 {
		t.Fatalf("json rows: %+v", page.Nodes)
	}
	c := page.Nodes[0].Children[1]
	if c.RKey != idea || c.DID != friend.DID.String() || c.Author != friend.DID.String() || !c.ReadOnly || c.Parent != nodeURI(owner.DID, team) || c.Detached != "" {
		t.Fatalf("the contribution's row: %+v", *c)
	}
	if len(c.Children) != 1 || c.Children[0].RKey != detail || c.Children[0].Author != friend.DID.String() || !c.Children[0].ReadOnly || c.Children[0].Detached != "" {
		t.Fatalf("the contribution's child rows: %+v", c.Children)
	}
	if mine := page.Nodes[0].Children[0]; mine.Author != "" || mine.ReadOnly {
		t.Fatalf("the owner's own row: %+v", *mine)
	}

	// the friend's list_detached: the contribution apart, without a
	// re-attach hint; only the bullet under the private one is detached
	type row struct{ RKey, Text, Parent, Reason string }
	var det struct{ Detached, Contributions []row }
	got = ok(friendEnv, "list_detached", `{}`, &det)
	if len(det.Contributions) != 1 || det.Contributions[0].RKey != idea || len(det.Detached) != 1 || det.Detached[0].RKey != stray {
		t.Fatalf("list_detached: %+v\n%s", det, got)
	}
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, idea) && (strings.Contains(l, "detached") || strings.Contains(l, "move_node") || strings.Contains(l, "re-attach") || strings.Contains(l, "parent=")) {
			t.Fatalf("list_detached says of the contribution: %q", l)
		}
	}
	if strings.Contains(got, detail) {
		t.Fatalf("list_detached names the contribution's child:\n%s", got)
	}
	t.Logf("the friend's list_detached:\n%s", got)

	// the friend's agent cannot pull the contribution out of the shared
	// outline
	refused(friendEnv, "cross_repo", "move_node", `{"node":"`+idea+`","parent":"top"}`)
	refused(friendEnv, "cross_repo", "move_node", `{"node":"`+idea+`","parent":"top","dry_run":true}`)
	refused(friendEnv, "cross_repo", "move_node", `{"node":"`+idea+`","parent":"`+own+`"}`)
	refused(friendEnv, "cross_repo", "move_node", `{"nodes":["`+idea+`"],"parent":"`+own+`","position":"first"}`)
	refused(friendEnv, "cross_repo", "apply_batch", `{"ops":[{"tool":"update_node","args":{"node":"`+own+`","text":"renamed"}},{"tool":"move_node","args":{"node":"`+idea+`","parent":"top"}}]}`)
	// nor under the owner's bullet that does not admit the friend
	refused(friendEnv, "cross_repo", "move_node", `{"node":"`+idea+`","parent":"`+nodeURI(owner.DID, private)+`"}`)
	// the stray bullet (not admitted) is detached and can be re-attached
	ok(friendEnv, "move_node", `{"node":"`+stray+`","parent":"top","dry_run":true}`, nil)

	// the owner's agent cannot edit the friend's bullets
	refused(ownerEnv, "cross_repo", "update_node", `{"node":"`+nodeURI(friend.DID, idea)+`","text":"edited by the owner"}`)
	refused(ownerEnv, "cross_repo", "complete_todo", `{"node":"`+nodeURI(friend.DID, idea)+`"}`)
	refused(ownerEnv, "cross_repo", "delete_node", `{"node":"`+nodeURI(friend.DID, detail)+`"}`)
	refused(ownerEnv, "cross_repo", "move_node", `{"node":"`+nodeURI(friend.DID, idea)+`","parent":"top"}`)
	refused(ownerEnv, "node_missing", "update_node", `{"node":"`+idea+`","text":"edited by the owner"}`)

	// the friend's agent adds under the owner's shared bullet (a record in
	// the friend's repository whose parent is the owner's bullet), placed
	// among the owner's bullets there; not under the private one, and not
	// after a bullet that is not there
	refused(friendEnv, "cross_repo", "insert_after", `{"parent":"`+nodeURI(owner.DID, private)+`","text":"under the private list"}`)
	refused(friendEnv, "anchor_missing", "insert_after", `{"parent":"`+nodeURI(owner.DID, team)+`","after":"`+nodeURI(owner.DID, private)+`","text":"after a stranger"}`)
	ownerBefore := records(t, srv, owner.DID)
	var fw1 tools.WriteResult
	t.Logf("dry run:\n%s", ok(friendEnv, "insert_after", `{"parent":"`+nodeURI(owner.DID, team)+`","after":"`+nodeURI(owner.DID, step)+`","text":"Friend's step in between","dry_run":true}`, nil))
	t.Logf("insert:\n%s", ok(friendEnv, "insert_after", `{"parent":"`+nodeURI(owner.DID, team)+`","after":"`+nodeURI(owner.DID, step)+`","text":"Friend's step in between"}`, &fw1))
	between := fw1.Created[0].RKey
	ok(friendEnv, "insert_after", `{"parent":"`+nodeURI(owner.DID, team)+`","position":"first","text":"Friend's opener"}`, &fw1)
	opener := fw1.Created[0].RKey
	got = ok(ownerEnv, "read_outline", `{}`, nil)
	want = "- Team plan ·" + team + "\n" +
		"  - Friend's opener" + by + " ·" + opener + "\n" +
		"  - Owner's first step ·" + step + "\n" +
		"  - Friend's step in between" + by + " ·" + between + "\n" +
		"  - Friend's idea" + by + " ·" + idea + "\n"
	if ownerAfter := records(t, srv, owner.DID); !reflect.DeepEqual(ownerBefore, ownerAfter) {
		t.Fatalf("the friend's inserts changed the owner's repository:\nbefore %v\nafter  %v", ownerBefore, ownerAfter)
	}
	if !strings.HasPrefix(got, want) {
		t.Fatalf("the owner's outline after the friend's inserts:\n%s\nwant it to begin\n%s", got, want)
	}

	// it edits its contribution and adds under it; the owner sees both in
	// place
	ok(friendEnv, "update_node", `{"node":"`+idea+`","text":"Friend's idea, revised"}`, nil)
	var fw2 tools.WriteResult
	ok(friendEnv, "insert_after", `{"parent":"`+idea+`","after":"`+detail+`","text":"Friend's second detail"}`, &fw2)
	second := fw2.Created[0].RKey
	got = ok(ownerEnv, "read_outline", `{}`, nil)
	want = "  - Friend's idea, revised" + by + " ·" + idea + "\n" +
		"    - Friend's detail" + by + " ·" + detail + "\n" +
		"    - Friend's second detail" + by + " ·" + second + "\n"
	if !strings.Contains(got, want) {
		t.Fatalf("the owner's outline after the friend's edits:\n%s\nwant it to contain\n%s", got, want)
	}

	// the friend's agent reorders its contributions within the shared
	// bullet: only their sortKeys change, in the friend's repository; the
	// owner's repository is untouched and its outline shows the new order
	ownerBefore = records(t, srv, owner.DID)
	friendBefore := records(t, srv, friend.DID)
	ok(friendEnv, "move_node", `{"node":"`+idea+`","after":"`+nodeURI(owner.DID, step)+`","dry_run":true}`, nil)
	if !reflect.DeepEqual(friendBefore, records(t, srv, friend.DID)) {
		t.Fatal("a dry run of a reorder wrote")
	}
	t.Logf("reorder:\n%s", ok(friendEnv, "move_node", `{"node":"`+idea+`","after":"`+nodeURI(owner.DID, step)+`"}`, nil))
	ok(friendEnv, "move_node", `{"node":"`+opener+`","parent":"`+nodeURI(owner.DID, team)+`","position":"last"}`, nil)
	got = ok(ownerEnv, "read_outline", `{}`, nil)
	want = "- Team plan ·" + team + "\n" +
		"  - Owner's first step ·" + step + "\n" +
		"  - Friend's idea, revised" + by + " ·" + idea + "\n" +
		"    - Friend's detail" + by + " ·" + detail + "\n" +
		"    - Friend's second detail" + by + " ·" + second + "\n" +
		"  - Friend's step in between" + by + " ·" + between + "\n" +
		"  - Friend's opener" + by + " ·" + opener + "\n" +
		"- Private list ·" + private + "\n"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("the owner's outline after the friend's reorders:\n%s\nwant it to begin\n%s", got, want)
	}
	if ownerAfter := records(t, srv, owner.DID); !reflect.DeepEqual(ownerBefore, ownerAfter) {
		t.Fatalf("the friend's reorders changed the owner's repository:\nbefore %v\nafter  %v", ownerBefore, ownerAfter)
	}
	was := map[string]map[string]any{}
	for _, r := range friendBefore {
		was[r.Collection+"/"+r.RKey] = r.Value
	}
	friendAfter := records(t, srv, friend.DID)
	if len(friendAfter) != len(friendBefore) {
		t.Fatalf("the friend's repository has %d records, had %d", len(friendAfter), len(friendBefore))
	}
	for _, r := range friendAfter {
		old := was[r.Collection+"/"+r.RKey]
		for k, v := range r.Value {
			if k != "sortKey" && !reflect.DeepEqual(old[k], v) {
				t.Fatalf("the friend's record %s: %s changed (%v -> %v)", r.RKey, k, old[k], v)
			}
		}
		if moved := r.RKey == idea || r.RKey == opener; moved == (old["sortKey"] == r.Value["sortKey"]) {
			t.Fatalf("the friend's record %s: sortKey %v -> %v", r.RKey, old["sortKey"], r.Value["sortKey"])
		}
	}

	// and the friend's records are as the friend wrote them
	want2 := map[string]string{idea: nodeURI(owner.DID, team), detail: nodeURI(friend.DID, idea), stray: nodeURI(owner.DID, private), own: "", second: nodeURI(friend.DID, idea),
		between: nodeURI(owner.DID, team), opener: nodeURI(owner.DID, team)}
	for _, r := range records(t, srv, friend.DID) {
		if r.Collection != "app.bulleted.node" {
			continue
		}
		p, _ := r.Value["parent"].(string)
		if wp, known := want2[r.RKey]; !known || p != wp {
			t.Fatalf("the friend's record %s: parent %q (text %q)", r.RKey, p, r.Value["text"])
		}
		delete(want2, r.RKey)
	}
	if len(want2) != 0 {
		t.Fatalf("the friend's records lack %v", want2)
	}
}

// records lists did's app.bulleted records through the PDS (listRecords).
func records(t *testing.T, srv *pdstest.Server, did syntax.DID) []pdstest.Record {
	t.Helper()
	recs, err := pdstest.ReadRecords(context.Background(), srv.URL, did)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// otherApp is a second client of a, outside the server: another app.
func otherApp(t *testing.T, srv *pdstest.Server, a *pdstest.Account) *atclient.APIClient {
	t.Helper()
	c, err := srv.Client(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func stamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }
