package controller

import "testing"

func TestWakeups(t *testing.T) {
	key := bindingKey("test", "x")
	type step struct {
		do   string // start, finish, wrote, wrote-unsettled, announce
		rev  int64
		want bool // of finish and announce
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a change is news to an engine that wrote nothing", []step{
			{do: "announce", rev: 5, want: true},
		}},
		{"the news of its own writes, announced while it works, end with a settled write", []step{
			{do: "start"},
			{do: "wrote-unsettled", rev: 3},
			{do: "announce", rev: 3},
			{do: "wrote", rev: 4},
			{do: "announce", rev: 4},
			{do: "finish", want: false},
			{do: "announce", rev: 5, want: true},
		}},
		{"a write that leaves the object unsettled wakes it up again", []step{
			{do: "start"},
			{do: "wrote", rev: 3},
			{do: "wrote-unsettled", rev: 4},
			{do: "announce", rev: 3},
			{do: "finish", want: true},
		}},
		{"someone else's change after the settled write is news", []step{
			{do: "start"},
			{do: "wrote", rev: 4},
			{do: "announce", rev: 5},
			{do: "finish", want: true},
		}},
		{"the settled write's own news after the reconcile is not", []step{
			{do: "start"},
			{do: "wrote", rev: 4},
			{do: "finish", want: false},
			{do: "announce", rev: 4, want: false},
			// Forgotten once announced: later changes are news.
			{do: "announce", rev: 4, want: true},
			{do: "announce", rev: 6, want: true},
		}},
		{"a change after the settled write, announced after the reconcile", []step{
			{do: "start"},
			{do: "wrote", rev: 4},
			{do: "finish", want: false},
			{do: "announce", rev: 7, want: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWakeups()
			for i, s := range tc.steps {
				var got bool
				switch s.do {
				case "start":
					w.start(key)
					continue
				case "wrote", "wrote-unsettled":
					w.wrote(key, s.rev, s.do == "wrote")
					continue
				case "finish":
					got = w.finish(key)
				case "announce":
					got = w.announce(key, s.rev)
				}
				if got != s.want {
					t.Fatalf("step %d (%s %d): %v, want %v", i, s.do, s.rev, got, s.want)
				}
			}
			if len(w.working) != 0 {
				t.Errorf("still working: %v", w.working)
			}
		})
	}
}
