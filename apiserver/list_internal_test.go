package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"

	"golang.org/x/sync/errgroup"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
)

// slowWriter is a client that stops reading for a while after the first
// part of a response.
type slowWriter struct {
	*httptest.ResponseRecorder
	pause  time.Duration
	writes int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if w.writes++; w.writes == 2 {
		time.Sleep(w.pause)
	}
	return w.ResponseRecorder.Write(p)
}

// TestListCutShort: a list whose snapshot expires once its response has
// begun (a client that reads too slowly) is cut short, so that the client
// sees a broken response rather than a complete-looking short list.
func TestListCutShort(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	ctx := context.Background()
	var g errgroup.Group
	for w := range 8 {
		g.Go(func() error {
			for i := w; i < 1200; i += 8 {
				in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
				in.Name, in.Namespace = fmt.Sprintf("db-%04d", i), "team"
				if _, err := store.CreateInstance(ctx, in); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	short := catalog.NewStore(poolOf(store), keys, nil, catalog.WithSnapshotLimit(300*time.Millisecond))
	st := *storageOf(storages["serviceinstances"])
	st.store = short
	req := httptest.NewRequest("GET", "/apis/servicecatalog.k8s.io/v1beta1/serviceinstances", nil)
	var jsonInfo runtime.SerializerInfo
	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			jsonInfo = info
		}
	}
	enc, err := st.listEncoding(req, negotiation.MediaTypeOptions{Accepted: jsonInfo})
	if err != nil {
		t.Fatal(err)
	}
	w := &slowWriter{ResponseRecorder: httptest.NewRecorder(), pause: time.Second}
	func() {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Errorf("the list ended with %v, want it aborted", r)
			}
		}()
		st.serveList(ctx, w, req, &metainternalversion.ListOptions{}, enc)
	}()
	if w.Code != http.StatusOK || w.Body.Len() == 0 {
		t.Errorf("aborted after %d, %d bytes: want a response begun", w.Code, w.Body.Len())
	}
}
