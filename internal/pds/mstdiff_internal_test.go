package pds

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"weak"

	"github.com/bluesky-social/indigo/atproto/atdata"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// model is a repository on a simulated PDS: its records, and the blocks
// the PDS stores, each with the revision that wrote it. As the reference
// PDS does, a commit deletes the blocks it no longer reaches and stores the
// ones it newly reaches (a block written again after it was deleted gets
// the new revision), and getRepo?since=rev answers the stored blocks of
// later revisions.
type model struct {
	t      testing.TB
	rng    *rand.Rand
	did    syntax.DID
	state  map[string]cid.Cid      // key → record CID
	values map[string]blocks.Block // every record block ever made
	stored map[string]storedBlock
	commit cid.Cid
	rev    string
	tick   int64
	nodes  map[string]bool // the MST nodes of the current commit
	past   map[string]map[string]cid.Cid
	gone   []entry // deleted keys with their last value, to create again

	tree      mst.Tree                  // of the last commit, changed in place
	committed map[string]cid.Cid        // its state
	made      map[string]blocks.Block   // MST node blocks by CID key
	decoded   map[string]map[string]any // record values by CID key
}

type storedBlock struct {
	blk blocks.Block
	rev string
}

type entry struct {
	key string
	val cid.Cid
}

func newModel(t testing.TB, seed uint64) *model {
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, seed*7+1)), did: "did:plc:modelrepository0000000000",
		state: map[string]cid.Cid{}, values: map[string]blocks.Block{}, stored: map[string]storedBlock{},
		past: map[string]map[string]cid.Cid{}, tree: mst.NewEmptyTree(), committed: map[string]cid.Cid{},
		made: map[string]blocks.Block{}, decoded: map[string]map[string]any{}}
	return m
}

var modelCollections = []string{"app.bulleted.node", "app.bulleted.node", "app.bulleted.note", "app.bsky.feed.post"}

func (m *model) value(coll string) cid.Cid {
	v := map[string]any{"$type": coll, "text": fmt.Sprintf("text %d", m.rng.IntN(1<<30)), "n": int64(m.rng.IntN(5))}
	raw, err := atdata.MarshalCBOR(v)
	if err != nil {
		m.t.Fatal(err)
	}
	c, err := cid.NewPrefixV1(cid.DagCBOR, 0x12).Sum(raw)
	if err != nil {
		m.t.Fatal(err)
	}
	blk, _ := blocks.NewBlockWithCid(raw, c)
	m.values[c.KeyString()] = blk
	return c
}

func (m *model) newKey() string {
	coll := modelCollections[m.rng.IntN(len(modelCollections))]
	return coll + "/" + syntax.NewTID(1_700_000_000_000_000+m.rng.Int64N(1<<40), uint(m.rng.IntN(1024))).String()
}

// mutate changes k random records: creates, updates, deletes, and creates
// again of deleted records with their old value (which restores MST nodes
// the PDS deleted).
func (m *model) mutate(k int) {
	keys := slices.Sorted(maps.Keys(m.state))
	for range k {
		switch x := m.rng.IntN(10); {
		case x < 4 || len(keys) == 0:
			key := m.newKey()
			m.state[key] = m.value(strings.Split(key, "/")[0])
		case x < 6:
			key := keys[m.rng.IntN(len(keys))]
			if _, ok := m.state[key]; ok {
				m.state[key] = m.value(strings.Split(key, "/")[0])
			}
		case x < 8:
			key := keys[m.rng.IntN(len(keys))]
			if v, ok := m.state[key]; ok {
				m.gone = append(m.gone, entry{key, v})
				delete(m.state, key)
			}
		case x < 9 && len(keys) > 0 && m.rng.IntN(3) == 0:
			// a value named by a second key (of any collection): one
			// block for both
			key, v := m.newKey(), m.state[keys[m.rng.IntN(len(keys))]]
			if v.Defined() {
				m.state[key] = v
			}
		default:
			if len(m.gone) > 0 {
				i := m.rng.IntN(len(m.gone))
				e := m.gone[i]
				m.gone = slices.Delete(m.gone, i, i+1)
				if _, ok := m.state[e.key]; !ok {
					m.state[e.key] = e.val
				}
			}
		}
	}
}

// commitState makes a commit of the current state on the simulated PDS.
func (m *model) commitState() {
	tree := &m.tree
	for k, v := range m.state {
		if m.committed[k] != v {
			if _, err := tree.Insert([]byte(k), v); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	for k := range m.committed {
		if _, ok := m.state[k]; !ok {
			if _, err := tree.Remove([]byte(k)); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	m.committed = maps.Clone(m.state)
	root, err := tree.RootCID()
	if err != nil {
		m.t.Fatal(err)
	}
	m.tick++
	m.rev = syntax.NewTID(1_800_000_000_000_000+m.tick, 0).String()
	now := map[string]blocks.Block{}
	nodes := map[string]bool{}
	var visit func(n *mst.Node)
	visit = func(n *mst.Node) {
		blk, ok := m.made[n.CID.KeyString()]
		if !ok {
			nd := n.NodeData()
			raw, c, err := nd.Bytes()
			if err != nil || *c != *n.CID {
				m.t.Fatal("encoding an MST node", err)
			}
			blk, _ = blocks.NewBlockWithCid(raw, *c)
			m.made[c.KeyString()] = blk
		}
		now[n.CID.KeyString()] = blk
		nodes[n.CID.KeyString()] = true
		for _, e := range n.Entries {
			if e.Child != nil {
				visit(e.Child)
			}
		}
	}
	visit(tree.Root)
	if c := tree.Root.CID; c == nil || *c != *root {
		m.t.Fatal("root CID")
	}
	for _, v := range m.state {
		now[v.KeyString()] = m.values[v.KeyString()]
	}
	cm := atrepo.Commit{DID: m.did.String(), Version: atrepo.ATPROTO_REPO_VERSION, Data: *root, Sig: []byte{1}, Rev: m.rev}
	var buf bytes.Buffer
	if err := cm.MarshalCBOR(&buf); err != nil {
		m.t.Fatal(err)
	}
	cc, _ := cid.NewPrefixV1(cid.DagCBOR, 0x12).Sum(buf.Bytes())
	cb, _ := blocks.NewBlockWithCid(buf.Bytes(), cc)
	now[cc.KeyString()] = cb
	for k := range m.stored {
		if _, ok := now[k]; !ok {
			delete(m.stored, k)
		}
	}
	for k, b := range now {
		if _, ok := m.stored[k]; !ok {
			m.stored[k] = storedBlock{b, m.rev}
		}
	}
	m.commit, m.nodes = cc, nodes
	m.past[cc.String()] = maps.Clone(m.state)
}

// since is the simulated getRepo?since=rev ("" : the whole repository),
// read as the server reads it: a whole repository for a walk (buildCAR),
// a difference with every block's bytes (diff).
func (m *model) since(rev string) *fetched {
	return fetchedOf(m.t, m.commit, m.sent(rev), rev != "")
}

// sinceRaw is since, every block's bytes kept: the whole repository from
// a PDS that ignores since, whose difference is taken.
func (m *model) sinceRaw(rev string) *fetched {
	return fetchedOf(m.t, m.commit, m.sent(rev), true)
}

// sent is the blocks getRepo?since=rev brings.
func (m *model) sent(rev string) blockMap {
	bs := blockMap{}
	for k, s := range m.stored {
		if rev == "" || s.rev > rev {
			bs[k] = s.blk
		}
	}
	return bs
}

// fetchedOf is what readBlocks makes of a CAR of bs with root (raw: every
// block's bytes kept), decoded by two workers.
func fetchedOf(t testing.TB, root cid.Cid, bs blockMap, raw bool) *fetched {
	t.Helper()
	var buf bytes.Buffer
	if err := store.WriteCAR(&buf, root, slices.Collect(maps.Values(bs))); err != nil {
		t.Fatal(err)
	}
	f, err := readBlocks(context.Background(), &buf, 2, raw)
	if err != nil {
		t.Fatal(err)
	}
	if f.received != len(bs) {
		t.Fatalf("read %d blocks of %d", f.received, len(bs))
	}
	return f
}

// count is how many blocks f holds.
func (f *fetched) count() int {
	n := len(f.index)
	if f.rootBlk != nil {
		n++
	}
	return n
}

// appRecords is the app.bulleted part of a state, as a snapshot lists it.
func (m *model) appRecords(state map[string]cid.Cid) []store.Record {
	var out []store.Record
	for _, k := range slices.Sorted(maps.Keys(state)) {
		if !strings.HasPrefix(k, store.Prefix) {
			continue
		}
		v, ok := m.decoded[state[k].KeyString()]
		if !ok {
			var err error
			if v, err = atdata.UnmarshalCBOR(m.values[state[k].KeyString()].RawData()); err != nil {
				m.t.Fatal(err)
			}
			m.decoded[state[k].KeyString()] = v
		}
		coll, rkey, _ := strings.Cut(k, "/")
		out = append(out, store.Record{Collection: coll, RKey: rkey, CID: state[k].String(), Value: store.MustValue(v)})
	}
	return out
}

// checkKept: the kept repository is exactly the model's current commit.
func (m *model) checkKept(c *carRepo) {
	m.t.Helper()
	if c.commit != m.commit {
		m.t.Fatalf("kept commit %s, the PDS is at %s", c.commit, m.commit)
	}
	if got := slices.Sorted(maps.Keys(c.nodes)); !slices.Equal(got, slices.Sorted(maps.Keys(m.nodes))) {
		m.t.Fatalf("kept %d MST nodes, the tree has %d", len(got), len(m.nodes))
	}
	// other apps' records counted by CID, app.bulleted ones held in
	// their nodes (checked below by lookup and the snapshot)
	others, app := map[string]int32{}, 0
	for k, v := range m.state {
		if strings.HasPrefix(k, store.Prefix) {
			app++
		} else {
			others[v.KeyString()]++
		}
	}
	if !maps.Equal(c.others, others) || c.held != app {
		m.t.Fatalf("other apps' record counts differ (%d kept, %d in the tree), or app.bulleted keys (%d kept, %d)", len(c.others), len(others), c.held, app)
	}
	want := map[string]bool{m.commit.KeyString(): true}
	for k := range m.nodes {
		want[k] = true
	}
	for _, v := range m.state {
		want[v.KeyString()] = true
	}
	if len(c.allBlocks()) != len(want) {
		m.t.Fatalf("kept %d blocks, the repository has %d", len(c.allBlocks()), len(want))
	}
	for k := range want {
		b, ok := c.block(k)
		if !ok {
			m.t.Fatalf("block %s is not kept", cidOfKey(k))
		}
		if !bytes.Equal(b.RawData(), m.stored[k].blk.RawData()) {
			m.t.Fatalf("block %s is kept with other bytes", cidOfKey(k))
		}
	}
	for k, v := range m.state {
		got, val, err := c.lookup([]byte(k))
		if err != nil || got != v {
			m.t.Fatalf("lookup %s: %v %v, want %s", k, got, err, v)
		}
		if app := strings.HasPrefix(k, store.Prefix); app != !val.IsZero() || app && !bytes.Equal(val.CBOR(), m.stored[v.KeyString()].blk.RawData()) {
			m.t.Fatalf("lookup %s: its value is not the record's", k)
		}
	}
	if got, _, err := c.lookup([]byte(m.newKey())); err != nil || got.Defined() {
		m.t.Fatalf("lookup of a missing key: %v %v", got, err)
	}
	c.snap, c.given = nil, weak.Pointer[store.Snapshot]{}
	s, _, err := c.snapshot(m.did)
	if err != nil {
		m.t.Fatal(err)
	}
	if want := m.appRecords(m.state); !sameList(s.Records, want) {
		m.t.Fatalf("snapshot: %d records, want %d", len(s.Records), len(want))
	}
	// the cache file of it (written as saveCache streams it), read back
	// as a fresh start reads it: every block there, with its bytes, and
	// the same records; byte for byte what WriteCAR makes of the blocks
	var buf, whole bytes.Buffer
	if err := c.parts().write(&buf, c.commit); err != nil {
		m.t.Fatal(err)
	}
	if err := store.WriteCAR(&whole, c.commit, c.allBlocks()); err != nil {
		m.t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), whole.Bytes()) {
		m.t.Fatalf("the streamed cache (%d bytes) is not WriteCAR's (%d)", buf.Len(), whole.Len())
	}
	f, err := readBlocks(context.Background(), bytes.NewReader(buf.Bytes()), 1, true)
	if err != nil {
		m.t.Fatal("reading the cache back:", err)
	}
	if f.count() != len(want) {
		m.t.Fatalf("the cache holds %d blocks, the repository has %d", f.count(), len(want))
	}
	for k := range want {
		if b, ok := f.block(k); !ok || !bytes.Equal(b.RawData(), m.stored[k].blk.RawData()) {
			m.t.Fatalf("block %s is not in the cache as it is", cidOfKey(k))
		}
	}
	// as a start reads it (the bytes a walk does not need dropped)
	f, err = readBlocks(context.Background(), &buf, 1, false)
	if err != nil {
		m.t.Fatal("reading the cache back:", err)
	}
	fresh, err := buildCAR(f, m.did)
	if err != nil {
		m.t.Fatal("opening the cache:", err)
	}
	if fresh.snap == nil || !sameList(fresh.snap.Records, s.Records) {
		m.t.Fatal("the cache opens with other records")
	}
}

// checkChanges: changes (from the state of commit since) bring since's
// records to the current ones, and name every record that differs.
func (m *model) checkChanges(since string, changes []store.Record) {
	m.t.Helper()
	from := m.past[since]
	got := map[string]store.Record{}
	for _, r := range m.appRecords(from) {
		got[r.Collection+"/"+r.RKey] = r
	}
	named := map[string]bool{}
	for _, ch := range changes {
		k := ch.Collection + "/" + ch.RKey
		named[k] = true
		if ch.Value.IsZero() {
			delete(got, k)
		} else {
			got[k] = ch
		}
	}
	want := m.appRecords(m.state)
	have := slices.SortedFunc(maps.Values(got), store.CompareRecords)
	if !sameList(have, want) {
		m.t.Fatalf("changes since %s do not give the records of the head (%d records, want %d)", since, len(have), len(want))
	}
	for k, v := range m.state {
		if strings.HasPrefix(k, store.Prefix) && from[k] != v && !named[k] {
			m.t.Fatalf("%s changed but is not among the changes", k)
		}
	}
	for k := range from {
		if _, ok := m.state[k]; !ok && strings.HasPrefix(k, store.Prefix) && !named[k] {
			m.t.Fatalf("%s was deleted but is not among the changes", k)
		}
	}
}

func changedKeys(cs []change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.key)
	}
	return out
}

// sameList: a and b hold the same, nil or empty alike.
func sameList[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// fullDiff is the difference of two states by walking both: what diff must
// find.
func fullDiff(a, b map[string]cid.Cid) []change {
	var out []change
	for k, v := range b {
		if strings.HasPrefix(k, store.Prefix) && a[k] != v {
			out = append(out, change{key: k, old: a[k], new: v})
		}
	}
	for k, v := range a {
		if _, ok := b[k]; !ok && strings.HasPrefix(k, store.Prefix) {
			out = append(out, change{key: k, old: v})
		}
	}
	slices.SortFunc(out, func(x, y change) int { return strings.Compare(x.key, y.key) })
	return out
}

// The MST difference of generated trees, commit after commit (several
// commits between reads, records deleted and created again), equals the
// difference of full walks, and the kept repository stays exactly the
// current commit's. 24 seeds in the suite (every size 6 times: 77 s on a
// loaded two-core machine with 60, in a package go test kills at 11
// minutes); 60 with BULLETED_SCALE set.
func TestMSTDiffRandom(t *testing.T) {
	seeds := uint64(24)
	if os.Getenv("BULLETED_SCALE") != "" {
		seeds = 60
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newModel(t, seed)
			m.mutate(m.rng.IntN([]int{5, 60, 400, 1500}[seed%4]))
			m.commitState()
			c, err := buildCAR(m.since(""), m.did)
			if err != nil {
				t.Fatal(err)
			}
			m.checkKept(c)
			// a record's collection and key are its node's bytes
			// (keyString): the commits applied below must leave them as
			// they were read
			first, _, _ := c.snapshot(m.did)
			var names []string
			for _, r := range first.Records {
				names = append(names, strings.Clone(r.Collection+"/"+r.RKey))
			}
			defer func() {
				for i, r := range first.Records {
					if r.Collection+"/"+r.RKey != names[i] {
						t.Fatalf("record %d read as %s is now %s/%s", i, names[i], r.Collection, r.RKey)
					}
				}
			}()
			for range 25 {
				before := maps.Clone(m.state)
				for range 1 + m.rng.IntN(3) { // commits between two reads
					m.mutate(1 + m.rng.IntN([]int{1, 3, 40}[m.rng.IntN(3)]))
					m.commitState()
				}
				f := m.since(c.rev)
				if m.rng.IntN(8) == 0 {
					f = m.sinceRaw("") // a PDS that ignores since
				}
				st, err := c.diff(f, m.did)
				if err != nil {
					t.Fatal(err)
				}
				if want := fullDiff(before, m.state); !sameList(st.changes, want) {
					t.Fatalf("diff: %d changes, a full walk finds %d", len(st.changes), len(want))
				}
				c.apply(st)
				m.checkKept(c)
			}
		})
	}
}

// A record deleted, then created again with the same value: the second
// commit restores MST nodes the kept repository had before the first. They
// must count as new (the PDS sends them again), not as kept ones.
func TestMSTDiffRecreate(t *testing.T) {
	m := newModel(t, 99)
	m.mutate(2000)
	m.commitState()
	c, err := buildCAR(m.since(""), m.did)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for _, k := range slices.Sorted(maps.Keys(m.state)) {
		if strings.HasPrefix(k, "app.bulleted.node/") {
			key = k
			break
		}
	}
	val := m.state[key]
	origin := c.commit.String()
	for i, step := range []func(){
		func() { delete(m.state, key) },
		func() { m.state[key] = val },
	} {
		before := maps.Clone(m.state)
		step()
		m.commitState()
		st, err := c.diff(m.since(c.rev), m.did)
		if err != nil {
			t.Fatal(err)
		}
		if want := fullDiff(before, m.state); !reflect.DeepEqual(st.changes, want) || len(want) != 1 {
			t.Fatalf("step %d: diff changes %q, a full walk %q", i, changedKeys(st.changes), changedKeys(want))
		}
		c.apply(st)
		m.checkKept(c)
	}
	if m.past[origin] == nil || !maps.Equal(m.past[origin], m.state) {
		t.Fatal("the state did not come back")
	}
}

// Our own commits on top of the kept repository, other clients' commits,
// and reads in any order: Changes-like composition from any commit the
// reader knew gives the records of the head (the values of our own writes
// normalised as a read decodes them).
func TestFollowOwnAndForeign(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newModel(t, 1000+seed)
			m.mutate([]int{3, 50, 600}[seed%3])
			m.commitState()
			c, err := buildCAR(m.since(""), m.did)
			if err != nil {
				t.Fatal(err)
			}
			r := &Repo{did: m.did}
			r.keep(c)
			known := []string{r.head}
			for range 40 {
				switch x := m.rng.IntN(10); {
				case x < 4 && r.head == m.commit.String():
					// our own commit: the writes, then what applyWrites returned
					swap := m.commit.String()
					var writes []store.Write
					before := maps.Clone(m.state)
					m.mutate(1 + m.rng.IntN(4))
					for k, v := range m.state {
						if before[k] != v {
							coll, rkey, _ := strings.Cut(k, "/")
							val, _ := atdata.UnmarshalCBOR(m.values[v.KeyString()].RawData())
							val["n"] = int(val["n"].(int64)) // as a planner would send it
							op := store.Update
							if _, ok := before[k]; !ok {
								op = store.Create
							}
							writes = append(writes, store.Write{Op: op, Collection: coll, RKey: rkey, Value: val})
						}
					}
					for k := range before {
						if _, ok := m.state[k]; !ok {
							coll, rkey, _ := strings.Cut(k, "/")
							writes = append(writes, store.Write{Op: store.Delete, Collection: coll, RKey: rkey})
						}
					}
					m.commitState()
					results := make([]applyResult, len(writes))
					for i, w := range writes {
						if w.Op != store.Delete {
							results[i].CID = m.state[w.Collection+"/"+w.RKey].String()
						}
					}
					r.ownCommit(swap, m.commit.String(), m.rev, writes, results)
					if len(writes) > 0 && r.pending < maxPending && r.head != m.commit.String() {
						t.Fatal("our own commit was not followed")
					}
				case x < 7:
					m.mutate(1 + m.rng.IntN(20)) // another client
					m.commitState()
				default:
					// a read: getRepo?since= the kept revision
					f := m.since(r.car.rev)
					if f.root != r.car.commit {
						st, err := r.car.diff(f, m.did)
						if err != nil {
							t.Fatal(err)
						}
						r.follow(st)
					}
					if r.pending == 0 {
						m.checkKept(r.car)
					}
				}
				if r.head == m.commit.String() {
					known = append(known, r.head)
					// from the head, the last few commits known, and one older
					check := known[max(0, len(known)-3):]
					check = append(check, known[m.rng.IntN(len(known))])
					for _, since := range check {
						chain := r.chain(since)
						if chain == nil {
							continue // older than the history
						}
						m.checkChanges(since, compose(chain))
					}
				}
			}
		})
	}
}

// TestOddNodeBlockKept: an MST node whose block is not its own encoding
// (here: its map's keys in another order, which decodes the same) is kept
// as its block, and the cache file holds that block as it came: opened
// afresh, the repository and its records are whole.
func TestOddNodeBlockKept(t *testing.T) {
	m := newModel(t, 7)
	m.mutate(3) // a small tree: one node
	m.commitState()
	bs := m.sent("")
	var commit atrepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(bs[m.commit.KeyString()].RawData())); err != nil {
		t.Fatal(err)
	}
	root := bs[commit.Data.KeyString()]
	d, err := mst.NodeDataFromCBOR(bytes.NewReader(root.RawData()))
	if err != nil || d.Left != nil {
		t.Fatalf("the root node: %v, left %v", err, d.Left)
	}
	canon := root.RawData()
	// {"e": [...], "l": null} as {"l": null, "e": [...]}
	if canon[0] != 0xa2 || !bytes.HasSuffix(canon, []byte("\x61l\xf6")) {
		t.Fatalf("unexpected node encoding %x", canon)
	}
	odd := append([]byte{0xa2, 0x61, 'l', 0xf6}, canon[1:len(canon)-3]...)
	oddCID, _ := cid.NewPrefixV1(cid.DagCBOR, 0x12).Sum(odd)
	oddBlk, _ := blocks.NewBlockWithCid(odd, oddCID)
	if n, err := parseNode(oddCID, odd); err != nil || len(n.Entries) != len(d.Entries) {
		t.Fatalf("decoding the odd node: %v", err)
	}
	// the commit names the odd block instead
	commit.Data = oddCID
	var buf bytes.Buffer
	if err := commit.MarshalCBOR(&buf); err != nil {
		t.Fatal(err)
	}
	cc, _ := cid.NewPrefixV1(cid.DagCBOR, 0x12).Sum(buf.Bytes())
	cb, _ := blocks.NewBlockWithCid(buf.Bytes(), cc)
	delete(bs, m.commit.KeyString())
	delete(bs, root.Cid().KeyString())
	bs[cc.KeyString()], bs[oddCID.KeyString()] = cb, oddBlk
	c, err := buildCAR(fetchedOf(t, cc, bs, false), m.did)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.allBlocks()) != len(bs) || !bytes.Equal(c.nodes[oddCID.KeyString()].data, odd) {
		t.Fatalf("blocks %d, want %d; the odd node kept as it came: %v", len(c.allBlocks()), len(bs), bytes.Equal(c.nodes[oddCID.KeyString()].data, odd))
	}
	buf.Reset()
	if err := store.WriteCAR(&buf, c.commit, c.allBlocks()); err != nil {
		t.Fatal(err)
	}
	back, err := readBlocks(context.Background(), &buf, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := back.block(oddCID.KeyString()); !ok || !bytes.Equal(b.RawData(), odd) || back.count() != len(bs) {
		t.Fatalf("the cache holds %d blocks of %d, the odd node as it came: %v", back.count(), len(bs), ok)
	}
	fresh, err := buildCAR(back, m.did)
	if err != nil {
		t.Fatal(err)
	}
	if want := m.appRecords(m.state); !sameList(fresh.snap.Records, want) {
		t.Fatalf("opened afresh: %d records, want %d", len(fresh.snap.Records), len(want))
	}
}

// TestWholeReadKeepsOnlyWhatItNeeds: a whole read for a walk keeps the
// bytes of nodes and other apps' records (and of the commit) only, its
// app.bulleted records as values; a read whose difference is taken keeps
// every block's bytes.
func TestWholeReadKeepsOnlyWhatItNeeds(t *testing.T) {
	m := newModel(t, 11)
	m.mutate(400)
	m.commitState()
	f := m.since("")
	var recs, nodes, others int
	for k, e := range f.index {
		switch {
		case e.dec.rec:
			recs++
			if e.data != nil || e.dec.err != nil || e.dec.value.IsZero() {
				t.Fatalf("record %s: bytes kept %v, %v", cidOfKey(k), e.data != nil, e.dec.err)
			}
		case e.dec.node != nil:
			nodes++
			if !bytes.Equal(e.data, m.stored[k].blk.RawData()) {
				t.Fatalf("node %s: its bytes are not kept", cidOfKey(k))
			}
		default:
			others++
			if e.data == nil || !bytes.Equal(e.data, m.stored[k].blk.RawData()) {
				t.Fatalf("block %s of another app: its bytes are not kept", cidOfKey(k))
			}
		}
	}
	if recs == 0 || nodes < 2 || others == 0 {
		t.Fatalf("%d records, %d nodes, %d other blocks", recs, nodes, others)
	}
	raw := m.sinceRaw("")
	for k := range m.stored {
		if b, ok := raw.block(k); !ok || !bytes.Equal(b.RawData(), m.stored[k].blk.RawData()) {
			t.Fatalf("block %s is not kept by a raw read", cidOfKey(k))
		}
	}
}
