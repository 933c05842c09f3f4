package client

import (
	"net/http"

	"github.com/memfs/memfs/store"
)

// setProtocol sets the headers the hosted API requires on a request to
// path (/v1/...), as the official Go SDK (anthropic-sdk-go/v2 v2.15.0)
// sends them; TestProtocolMatchesSDK holds the two side by side:
//
//   - anthropic-version: store.APIVersion, on every request;
//   - anthropic-beta: the route family's value (store.BetaFor), the
//     memory routes' agent-memory beta or the managed-agents beta of
//     environments, the work queue, sessions and their events;
//   - the credential as Authorization: Bearer, whatever its kind. The
//     SDK's WithAPIKey and WithAuthToken both send it so, and its
//     lib/environments worker sends the environment key and the session
//     token so (clearing any x-api-key); the hosted API refuses an
//     environment key or a session token in x-api-key;
//   - User-Agent: memfs's own.
func (c *Client) setProtocol(h http.Header, path string) {
	store.SetProtocol(h, path, c.apiKey)
	h.Set("user-agent", c.ua)
}
