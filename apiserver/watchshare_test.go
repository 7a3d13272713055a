package apiserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
)

// TestWatchesBoundedPerUser: one user holds at most MaxWatchesPerUser
// watches open at once; one more is 429 with Retry-After naming the bound,
// another user's watch is served beside it, system:masters is not
// bounded, and a watch closed frees its place.
func TestWatchesBoundedPerUser(t *testing.T) {
	t.Parallel()
	store := apiserver.NewTestStore(t)
	_, broker := apiserver.RegisterFakeBroker(t, store)
	b := serve(t, store, broker, func(o *apiserver.Options) { o.MaxWatchesPerUser = 2 })
	as := func(name string) versioned.Interface {
		cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if name != "" {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
		}
		return versioned.NewForConfigOrDie(cfg)
	}
	ctx := context.Background()
	open := func(c versioned.Interface, namespace string) (watch.Interface, error) {
		// client-go retries a 429 with Retry-After up to ten times: once
		// is what the test asks.
		return c.ServicecatalogV1beta1().RESTClient().Get().Namespace(namespace).Resource("serviceinstances").
			VersionedParams(&metav1.ListOptions{Watch: true}, metav1.ParameterCodec).MaxRetries(0).Watch(ctx)
	}
	alice, bob, admin := as("alice"), as("bob"), as("")
	var held []watch.Interface
	t.Cleanup(func() {
		for _, w := range held {
			w.Stop()
		}
	})
	for _, ns := range []string{"a", "b"} {
		w, err := open(alice, ns)
		if err != nil {
			t.Fatalf("alice's watch of %s: %v", ns, err)
		}
		held = append(held, w)
	}
	_, err := open(alice, "c")
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "--max-watches-per-user") {
		t.Fatalf("alice's third watch: %v, want 429 naming the bound", err)
	}
	if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 1 {
		t.Errorf("alice's third watch suggests a delay of %d s (%v), want 1", s, ok)
	}
	if w, err := open(bob, "a"); err != nil {
		t.Errorf("bob's watch beside alice's at the bound: %v", err)
	} else {
		held = append(held, w)
	}
	for i := range 3 {
		w, err := open(admin, "a")
		if err != nil {
			t.Fatalf("system:masters' watch %d: %v", i+1, err)
		}
		held = append(held, w)
	}
	held[0].Stop()
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		w, err := open(alice, "c")
		if err == nil {
			held = append(held, w)
		}
		return err
	})
}
