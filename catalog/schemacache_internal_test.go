package catalog

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestSchemaCacheBounded: compiled plan schemas are kept per plan and
// kind at the plan's newest resourceVersion, and at most
// maxCachedSchemas in all, so a broker that changes its plans at every
// fetch, or names new plans each time, does not grow the process.
func TestSchemaCacheBounded(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer"}}}`)
	c := &schemaCache{}
	for rv := range int64(200) {
		plan := &ServicePlan{Meta: Meta{ID: "changing", ResourceVersion: rv + 1}}
		if _, err := c.get(plan, "instance create", raw); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.len(); n != 1 {
		t.Errorf("one plan changed 200 times: %d schemas kept, want 1", n)
	}
	for i := range 3 * maxCachedSchemas {
		plan := &ServicePlan{Meta: Meta{ID: fmt.Sprint("plan ", i), ResourceVersion: 1}}
		if _, err := c.get(plan, "instance create", raw); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.len(); n > maxCachedSchemas {
		t.Errorf("%d schemas kept, more than %d", n, maxCachedSchemas)
	}
	// The newest version of a plan is what is kept and validated against.
	plan := &ServicePlan{Meta: Meta{ID: "changing", ResourceVersion: 500}}
	strict := json.RawMessage(`{"type":"object","additionalProperties":false}`)
	s, err := c.get(plan, "instance create", strict)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.get(plan, "instance create", strict); again != s {
		t.Error("the same plan version compiled twice")
	}
}

func (c *schemaCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
