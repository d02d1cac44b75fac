package tools_test

import (
	"reflect"
	"testing"
)

// TestTickAndUntick: complete_todo ticks a todo (completedAt set) and
// completed=false unticks it (completedAt gone, still a todo), each read
// back from the repository; unticking an open todo writes nothing and says
// so; undo
// of the untick ticks it again.
func TestTickAndUntick(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	r.ok("insert_after", map[string]any{"text": "pay rent", "layout": "todo"})
	k := r.key("pay rent")
	value := func() map[string]any {
		t.Helper()
		for _, rec := range r.records() {
			if rec.RKey == k && rec.Collection == "app.bulleted.node" {
				return rec.Value.Map()
			}
		}
		t.Fatal("the todo is gone")
		return nil
	}
	r.ok("complete_todo", map[string]any{"node": k})
	if v := value(); v["completedAt"] == nil || v["layout"] != "todo" {
		t.Fatalf("after ticking: %v", v)
	}
	r.ok("complete_todo", map[string]any{"node": k, "completed": false})
	if v := value(); v["completedAt"] != nil || v["layout"] != "todo" {
		t.Fatalf("after unticking: completedAt %v, layout %v", v["completedAt"], v["layout"])
	}
	before := r.records()
	if sc := r.ok("complete_todo", map[string]any{"node": k, "completed": false}); sc["noChange"] != true {
		t.Fatalf("unticking an open todo: %v, want noChange", sc)
	}
	if after := r.records(); !reflect.DeepEqual(before, after) {
		t.Fatal("unticking an open todo wrote")
	}
	r.ok("undo", map[string]any{})
	if v := value(); v["completedAt"] == nil {
		t.Fatalf("undo of the untick left it open: %v", v)
	}
}
