package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/bindery-dev/bindery/catalog"
)

// TestKinds checks that each kind's descriptor makes the objects and
// lists of its kind, is found again from its objects, and points at the
// object's own metadata.
func TestKinds(t *testing.T) {
	t.Parallel()
	if len(kinds) != 8 || len(kindsByType) != 8 {
		t.Fatalf("%d kinds by name, %d by type; want 8 and 8", len(kinds), len(kindsByType))
	}
	for name, k := range kinds {
		obj := k.newObj()
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil || gvks[0].Kind != name {
			t.Errorf("%s: new object is %v (%v)", name, gvks, err)
		}
		if gvks, _, err := scheme.ObjectKinds(k.newList()); err != nil || gvks[0].Kind != name+"List" {
			t.Errorf("%s: new list is %v (%v)", name, gvks, err)
		}
		if kindOf(obj) != k {
			t.Errorf("%s: kindOf its object is another kind", name)
		}
		om, spec, status := k.parts(obj)
		om.Name = "x"
		if m, _ := meta.Accessor(obj); m.GetName() != "x" || spec == nil || status == nil {
			t.Errorf("%s: parts are not the object's", name)
		}
		back, err := fromRaw(name, &catalog.RawObject{Meta: catalog.Meta{Name: "y"}})
		if err != nil || kindOf(back) != k || objectMetaOf(back).Name != "y" {
			t.Errorf("%s: fromRaw gives %T (%v)", name, back, err)
		}
	}
}
