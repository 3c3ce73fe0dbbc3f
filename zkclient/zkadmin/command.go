package zkadmin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Command runs the AdminServer command name (such as "ruok", "srvr",
// "monitor", "connections" or "configuration"; "commands" lists them) on
// the AdminServer at base, its root URL such as "http://127.0.0.1:8080"
// (admin.serverAddress and admin.serverPort; the commands are served under
// /commands, ZooKeeper's admin.commandURL), and returns the JSON object the
// server answered. An answer whose "error" field is set is returned with
// an error that quotes it.
//
// Each command goes on a connection of its own, closed after the answer.
// The AdminServer is off unless the server's admin.enableServer is true,
// and it answers only on the address it binds.
func Command(ctx context.Context, base, name string, opts ...Option) (map[string]any, error) {
	cfg := configure(opts)
	h := cfg.http
	if h == nil {
		h = http.DefaultClient
	}
	u := strings.TrimSuffix(base, "/") + "/commands/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("zkadmin: %s: %w", name, err)
	}
	req.Close = true // one command, one connection, as with four-letter words
	resp, err := h.Do(req)
	if err != nil {
		return nil, fmt.Errorf("zkadmin: %s: %w", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("zkadmin: %s at %s: %w", name, u, err)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("zkadmin: %s at %s: %s: %.200q", name, u, resp.Status, body)
	}
	if e, ok := out["error"]; ok && e != nil {
		return out, fmt.Errorf("zkadmin: %s at %s: %v", name, u, e)
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("zkadmin: %s at %s: %s", name, u, resp.Status)
	}
	return out, nil
}
