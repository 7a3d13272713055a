package apiserver

import (
	"bytes"
	"io"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// TestSharedObjectEncodesOnce: every watcher writes the same bytes, encoded
// once per encoding; an encoder gets a copy it may change; the metadata
// reads through.
func TestSharedObjectEncodesOnce(t *testing.T) {
	in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team"}}
	var encoded atomic.Int64
	obj := share(in, &encoded)
	co, ok := obj.(runtime.CacheableObject)
	if !ok {
		t.Fatal("a shared object is not a runtime.CacheableObject")
	}
	if m, err := meta.Accessor(obj); err != nil || m.GetName() != "db" {
		t.Fatalf("metadata through meta.Accessor: %v, %v", m, err)
	}
	calls := map[runtime.Identifier]int{}
	encoder := func(id runtime.Identifier) func(runtime.Object, io.Writer) error {
		return func(o runtime.Object, w io.Writer) error {
			calls[id]++
			o.(*v1beta1.ServiceInstance).Name = "changed by the encoder"
			_, err := w.Write([]byte(string(id) + ":" + o.(*v1beta1.ServiceInstance).Name))
			return err
		}
	}
	for range 100 {
		for _, id := range []runtime.Identifier{"json", "table"} {
			var buf bytes.Buffer
			if err := co.CacheEncode(id, encoder(id), &buf); err != nil {
				t.Fatal(err)
			}
			if want := string(id) + ":changed by the encoder"; buf.String() != want {
				t.Fatalf("wrote %q, want %q", buf.String(), want)
			}
		}
	}
	if calls["json"] != 1 || calls["table"] != 1 || encoded.Load() != 2 {
		t.Errorf("encodings: %v (counted %d), want one of each", calls, encoded.Load())
	}
	if in.Name != "db" {
		t.Errorf("an encoder changed the shared object: %q", in.Name)
	}
}
