package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestUpdateWhileStatusChanges: an update sent from an instance's page
// while the engine writes the instance's status is recorded. The status
// write moves the resourceVersion the update read a moment before; the
// update reads the instance again rather than answering 409.
func TestUpdateWhileStatusChanges(t *testing.T) {
	b := inputSetup(t)
	ctx := t.Context()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.store.UpdateInstanceStatus(ctx, b.in.ID, func(in *catalog.Instance) error {
				in.Status.LastError = fmt.Sprint("status write ", i)
				return nil
			}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	conflicts := 0
	for range 40 {
		res := b.admin.post("/instances/"+b.in.ID, url.Values{})
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch res.StatusCode {
		case http.StatusSeeOther:
		case http.StatusConflict:
			conflicts++
		default:
			t.Fatalf("update: %d %s", res.StatusCode, body)
		}
	}
	close(stop)
	wg.Wait()
	if conflicts > 0 {
		t.Errorf("%d of 40 updates answered 409 because the status changed meanwhile", conflicts)
	}
}
