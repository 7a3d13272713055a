package controller

import "time"

// objectKey names an object of the work queue: an instance or a binding,
// by id, with its namespace, which the engine's lines take turns by
// (fair.go). A key whose namespace is not its object's names nothing: its
// reconcile does nothing (so a key built from a forged label cannot run
// beside the object's own). Its String, "instance/ID" or "binding/ID", is
// also what the object's claim is taken on, so replicas of every version
// agree.
type objectKey struct {
	kind      keyKind
	namespace string
	id        string
}

// keyKind is the kind of object a key names.
type keyKind uint8

const (
	instanceKeyKind keyKind = iota + 1
	bindingKeyKind
)

func instanceKey(namespace, id string) objectKey {
	return objectKey{kind: instanceKeyKind, namespace: namespace, id: id}
}

func bindingKey(namespace, id string) objectKey {
	return objectKey{kind: bindingKeyKind, namespace: namespace, id: id}
}

func (k objectKey) String() string { return k.kind.String() + "/" + k.id }

// String is the kind as metrics and logs name it.
func (k keyKind) String() string {
	switch k {
	case instanceKeyKind:
		return "instance"
	case bindingKeyKind:
		return "binding"
	}
	return "none"
}

// result is what a reconcile asks of the work queue, as
// controller-runtime's reconcile.Result does: nothing (the zero result:
// the object sleeps until a change wakes it), or to be looked at again
// after a while.
type result struct {
	// requeueAfter, when positive, is when to look at the object again.
	requeueAfter time.Duration
}

// after is the result that looks at the object again after d (none when
// d is not positive).
func after(d time.Duration) result { return result{requeueAfter: d} }
