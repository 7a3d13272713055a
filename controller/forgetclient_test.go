package controller

import (
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// TestDeletedBrokerClientDropped: the engine caches an OSB client (with
// its connection pool) per broker it called; a deleted broker's goes with
// it, or one would stay for every broker ever registered and deleted.
func TestDeletedBrokerClientDropped(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Store: new(catalog.Store), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	cl, err := osb.New(osb.Config{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	c.clients["deleted"] = cachedClient{version: 1, client: cl}
	c.clients["kept"] = cachedClient{version: 1, client: cl}
	c.brokerDeleted("deleted")
	if _, ok := c.clients["deleted"]; ok {
		t.Error("the deleted broker's client is still cached")
	}
	if _, ok := c.clients["kept"]; !ok {
		t.Error("another broker's client was dropped")
	}
}
