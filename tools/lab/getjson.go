package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// maxStatusBytes bounds what GetJSON reads: a front-end's /status with
// every back-end of a full lab and its histograms is some tens of KiB.
const maxStatusBytes = 8 << 20

// GetJSON GETs url with c (the daemons' /status pages: a lab's clients
// reach them through HTTPClient) and decodes the answer, which must be
// 200, into v. It returns the body as read, for callers that keep or
// print the whole document. Errors name the URL.
func GetJSON(ctx context.Context, c *http.Client, url string, v any) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err // *url.Error names the URL already
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("GET %s: %w", url, err)
	case resp.StatusCode != http.StatusOK:
		return body, fmt.Errorf("GET %s: %s", url, resp.Status)
	case len(body) > maxStatusBytes:
		return nil, fmt.Errorf("GET %s: the answer is larger than %d bytes", url, maxStatusBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return body, fmt.Errorf("GET %s: %w", url, err)
	}
	return body, nil
}
