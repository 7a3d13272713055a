package web

import (
	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// listChanges selects the changes of kind that a list page asking for q
// shows: in its namespace, or in any the session may see. Other
// namespaces' changes do not even wake the stream.
func listChanges(c echo.Context, kind string, q listQuery) func(change) bool {
	sess, _ := sessionOf(c)
	return func(ch change) bool {
		if ch.Kind != kind || !sess.AllowsNamespace(ch.Namespace) {
			return false
		}
		return q.Namespace == "" || ch.Namespace == q.Namespace
	}
}

// liveInstances keeps a page of the instances list current.
func (s *Server) liveInstances(c echo.Context) error {
	q, err := readListQuery(c)
	if err != nil {
		return err
	}
	return s.live(c, listChanges(c, catalog.KindInstance, q), func() ([]sseEvent, error) {
		v, err := s.instanceListData(c)
		if err != nil {
			return nil, err
		}
		list, err := s.renderString(c, "instances", "instance-list", v)
		return []sseEvent{{"list", list}}, err
	})
}
