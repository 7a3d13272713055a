package web

import (
	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// liveBrokers keeps a page of the brokers table current: the cluster's
// brokers and those of the session's namespaces. Other namespaces'
// brokers changing do not even wake the stream.
func (s *Server) liveBrokers(c echo.Context) error {
	if _, err := readPage(c); err != nil {
		return err
	}
	sess, _ := sessionOf(c)
	return s.live(c, func(ch change) bool {
		return ch.Kind == catalog.KindBroker || (ch.Kind == catalog.KindNamespacedBroker && sess.AllowsNamespace(ch.Namespace))
	}, func() ([]sseEvent, error) {
		rows, err := s.brokerRows(c)
		return []sseEvent{{"rows", rows}}, err
	})
}
