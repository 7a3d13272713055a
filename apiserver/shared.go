package apiserver

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sharedObject is a change the hub hands to every watcher of its kind. It
// is a runtime.CacheableObject: the watch handlers' encoders ask it for
// each encoding they need (JSON or protobuf, as a table or not, the event
// type), and it encodes the object once per encoding for all watchers,
// as kube-apiserver's watch cache does. Without it, 1,000 watchers meant
// 1,000 deep copies and 1,000 encodings of every change.
//
// Its metadata (the embedded metav1.Object, for meta.Accessor) must only be
// read: every watcher shares it. An encoder gets its own deep copy.
type sharedObject struct {
	metav1.Object
	obj runtime.Object
	// encoded counts the encodings made, across the hub's changes.
	encoded *atomic.Int64

	mu        sync.Mutex
	encodings map[runtime.Identifier]*encoding
}

type encoding struct {
	once sync.Once
	raw  []byte
	err  error
}

var _ runtime.CacheableObject = (*sharedObject)(nil)

// share wraps obj, an object with metadata, for every watcher; each
// encoding made adds one to encoded.
func share(obj runtime.Object, encoded *atomic.Int64) runtime.Object {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj
	}
	return &sharedObject{Object: m, obj: obj, encoded: encoded, encodings: map[runtime.Identifier]*encoding{}}
}

// CacheEncode writes the encoding id of the object, encoding it with encode
// the first time.
func (s *sharedObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	s.mu.Lock()
	e := s.encodings[id]
	if e == nil {
		e = &encoding{}
		s.encodings[id] = e
	}
	s.mu.Unlock()
	e.once.Do(func() {
		s.encoded.Add(1)
		var buf bytes.Buffer
		e.err = encode(s.obj.DeepCopyObject(), &buf)
		e.raw = buf.Bytes()
	})
	if e.err != nil {
		return e.err
	}
	if sp, ok := w.(runtime.Splice); ok {
		sp.Splice(e.raw)
		return nil
	}
	_, err := w.Write(e.raw)
	return err
}

// GetObject returns a deep copy of the object.
func (s *sharedObject) GetObject() runtime.Object { return s.obj.DeepCopyObject() }

// GetObjectKind is the object's kind.
func (s *sharedObject) GetObjectKind() schema.ObjectKind { return s.obj.GetObjectKind() }

// DeepCopyObject copies the object into a new sharedObject, without its
// encodings.
func (s *sharedObject) DeepCopyObject() runtime.Object {
	return share(s.obj.DeepCopyObject(), s.encoded)
}
