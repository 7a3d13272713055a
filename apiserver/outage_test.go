package apiserver

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// TestDatabaseOutage: with the database unreachable, reads and lists
// answer 503 with a Retry-After delay, as the REST API and /readyz do, not
// 500 InternalError.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now
	pool, err := pgxpool.New(context.Background(), "postgres://bindery:x@"+dead+"/catalog?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := &storage{kind: catalog.KindInstance, resource: v1beta1.Resource("serviceinstances"), namespaced: true,
		newFn: func() runtime.Object { return &v1beta1.ServiceInstance{} }, newListFn: func() runtime.Object { return &v1beta1.ServiceInstanceList{} },
		store: catalog.NewStore(pool, nil, nil)}
	ctx := genericapirequest.WithNamespace(context.Background(), "team")
	_, getErr := st.Get(ctx, "db", nil)
	_, listErr := st.List(ctx, &metainternalversion.ListOptions{})
	for what, err := range map[string]error{"get": getErr, "list": listErr} {
		s, ok := err.(apierrors.APIStatus)
		if !ok || s.Status().Code != http.StatusServiceUnavailable || s.Status().Details == nil || s.Status().Details.RetryAfterSeconds <= 0 {
			t.Errorf("%s during an outage: %v, want 503 with a retry delay", what, err)
		}
	}
}
