package osb

import (
	"context"
	"fmt"
	"net/http"
)

// probeBody is how much of a probe's answer is read: enough for an error's
// description, never the catalogue itself.
const probeBody = 4 << 10

// Probe asks GET /v2/catalog whether the broker answers, without reading
// the catalogue: the cheapest request OSB defines that changes nothing at
// the broker, which a platform may send at any time. A 200 is nil; any
// other answer, or none, is the error.
func (c *Client) Probe(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v2/catalog", nil)
	if err != nil {
		return err
	}
	c.authorize(req)
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("probe the catalog: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		return nil
	}
	answer, err := readAnswer(res, probeBody)
	if err != nil {
		return fmt.Errorf("probe the catalog: %w", err)
	}
	return decodeError(answer)
}
