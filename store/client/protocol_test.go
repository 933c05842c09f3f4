package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

// recorder is an httptest server that records every request's method,
// path and headers and answers each with a minimal body of the right
// shape, so that both clients get as far as sending.
type recorder struct {
	ts   *httptest.Server
	mu   sync.Mutex
	reqs []*http.Request // GUARDED_BY(mu)
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	rec.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, r.Clone(context.Background()))
		rec.mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/events/stream"):
			w.Header().Set("content-type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/work/poll"):
			w.Header().Set("content-type", "application/json")
			w.Write([]byte("null"))
		default:
			w.Header().Set("content-type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"data": []any{}, "has_more": false, "next_page": nil})
		}
	}))
	t.Cleanup(rec.ts.Close)
	return rec
}

// take returns the one request recorded since the last take.
func (rec *recorder) take(t *testing.T, who string) *http.Request {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != 1 {
		t.Fatalf("%s sent %d requests, want 1", who, len(rec.reqs))
	}
	r := rec.reqs[0]
	rec.reqs = nil
	return r
}

// The credentials of the comparison, one of each kind.
const (
	protoAdminKey = "sk-memfs-admin-test"
	protoEnvKey   = "sk-memfs-env-test"
	protoToken    = "sk-memfs-session-test"
)

// sdkOnly are the headers the SDK sends for its own telemetry and retry
// bookkeeping (X-Stainless-*), which memfs does not imitate; every other
// header name must be the same on both sides.
func sdkOnly(name string) bool {
	return strings.HasPrefix(http.CanonicalHeaderKey(name), "X-Stainless-")
}

// wire is what the comparison looks at in one request.
type wire struct {
	route      string   // method and path
	version    string   // anthropic-version
	betas      []string // anthropic-beta values, split and sorted
	credential []string // "header: scheme" of each header that carries the key
	names      []string // header names, sorted, without sdkOnly
	ua         string   // User-Agent
}

func wireOf(r *http.Request, key string) wire {
	w := wire{route: r.Method + " " + r.URL.Path, version: r.Header.Get("anthropic-version"), ua: r.UserAgent()}
	for _, v := range r.Header.Values("anthropic-beta") {
		for _, b := range strings.Split(v, ",") {
			w.betas = append(w.betas, strings.TrimSpace(b))
		}
	}
	slices.Sort(w.betas)
	for name, vs := range r.Header {
		if sdkOnly(name) {
			continue
		}
		w.names = append(w.names, name)
		for _, v := range vs {
			switch {
			case v == key:
				w.credential = append(w.credential, name+": (bare)")
			case strings.HasSuffix(v, " "+key):
				w.credential = append(w.credential, name+": "+strings.TrimSuffix(v, " "+key))
			}
		}
	}
	slices.Sort(w.names)
	slices.Sort(w.credential)
	return w
}

// TestProtocolMatchesSDK sends, for every route memfs's client uses, the
// same call through the official Go SDK (configured with each credential
// as the SDK and its lib/environments worker configure it) and through
// store/client, to a recorder, and compares the route, anthropic-version,
// anthropic-beta, where the credential goes and the header names. The
// memfs extensions (the change feed, healthcheck) have no SDK call: they
// are held to an SDK call of their route family.
func TestProtocolMatchesSDK(t *testing.T) {
	for _, v := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR"} {
		t.Setenv(v, "")
	}
	rec := newRecorder(t)
	ctx := context.Background()
	sdkFor := func(key string) anthropic.Client {
		opts := []option.RequestOption{option.WithBaseURL(rec.ts.URL), option.WithMaxRetries(0)}
		if key == protoAdminKey {
			opts = append(opts, option.WithAPIKey(key))
		} else {
			// As lib/environments' bearerReqOpts: the environment key or
			// the session token as the bearer, no x-api-key.
			opts = append(opts, option.WithHeaderDel("X-Api-Key"), option.WithAuthToken(key))
		}
		return anthropic.NewClient(opts...)
	}
	memfsFor := func(key string) *client.Client {
		c, err := client.New(client.Options{BaseURL: rec.ts.URL, APIKey: key, RetryMax: -1, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const st, mem, ver, env, sess, work = "memstore_1", "mem_1", "memver_1", "env_1", "sesn_1", "work_1"
	type call struct {
		name  string
		key   string
		sdk   func(c anthropic.Client)
		memfs func(c *client.Client)
	}
	memRef := anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st}
	calls := []call{
		// Memory stores, with the admin key.
		{"CreateStore", protoAdminKey,
			func(c anthropic.Client) { c.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "n"}) },
			func(c *client.Client) { c.CreateStore(ctx, store.CreateStoreInput{Name: "n"}) }},
		{"GetStore", protoAdminKey,
			func(c anthropic.Client) { c.Beta.MemoryStores.Get(ctx, st, anthropic.BetaMemoryStoreGetParams{}) },
			func(c *client.Client) { c.GetStore(ctx, st) }},
		{"UpdateStore", protoAdminKey,
			func(c anthropic.Client) {
				c.Beta.MemoryStores.Update(ctx, st, anthropic.BetaMemoryStoreUpdateParams{Name: param.NewOpt("m")})
			},
			func(c *client.Client) { c.UpdateStore(ctx, st, store.UpdateStoreInput{Name: ptr("m")}) }},
		{"ListStores", protoAdminKey,
			func(c anthropic.Client) { c.Beta.MemoryStores.List(ctx, anthropic.BetaMemoryStoreListParams{}) },
			func(c *client.Client) { c.ListStores(ctx, store.ListStoresOptions{}) }},
		{"ArchiveStore", protoAdminKey,
			func(c anthropic.Client) {
				c.Beta.MemoryStores.Archive(ctx, st, anthropic.BetaMemoryStoreArchiveParams{})
			},
			func(c *client.Client) { c.ArchiveStore(ctx, st) }},
		{"DeleteStore", protoAdminKey,
			func(c anthropic.Client) { c.Beta.MemoryStores.Delete(ctx, st, anthropic.BetaMemoryStoreDeleteParams{}) },
			func(c *client.Client) { c.DeleteStore(ctx, st) }},
	}
	// Memories and versions, with the admin key and with a session token
	// (a worker's mounts).
	for _, key := range []string{protoAdminKey, protoToken} {
		calls = append(calls, []call{
			{"CreateMemory", key,
				func(c anthropic.Client) {
					c.Beta.MemoryStores.Memories.New(ctx, st, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/a", Content: param.NewOpt("x")})
				},
				func(c *client.Client) { c.CreateMemory(ctx, st, "/a", "x") }},
			{"GetMemory", key,
				func(c anthropic.Client) { c.Beta.MemoryStores.Memories.Get(ctx, mem, memRef) },
				func(c *client.Client) { c.GetMemory(ctx, st, mem) }},
			{"UpdateMemory", key,
				func(c anthropic.Client) {
					c.Beta.MemoryStores.Memories.Update(ctx, mem, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st, Content: param.NewOpt("y")})
				},
				func(c *client.Client) { c.UpdateMemory(ctx, st, mem, store.UpdateMemoryInput{Content: ptr("y")}) }},
			{"DeleteMemory", key,
				func(c anthropic.Client) {
					c.Beta.MemoryStores.Memories.Delete(ctx, mem, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: st})
				},
				func(c *client.Client) { c.DeleteMemory(ctx, st, mem, nil) }},
			{"ListMemories", key,
				func(c anthropic.Client) {
					c.Beta.MemoryStores.Memories.List(ctx, st, anthropic.BetaMemoryStoreMemoryListParams{})
				},
				func(c *client.Client) { c.ListMemories(ctx, st, store.ListMemoriesOptions{}) }},
			{"ListVersions", key,
				func(c anthropic.Client) {
					c.Beta.MemoryStores.MemoryVersions.List(ctx, st, anthropic.BetaMemoryStoreMemoryVersionListParams{})
				},
				func(c *client.Client) { c.ListVersions(ctx, st, store.ListVersionsOptions{}) }},
			{"GetVersion", key,
				func(c anthropic.Client) {
					c.Beta.MemoryStores.MemoryVersions.Get(ctx, ver, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st})
				},
				func(c *client.Client) { c.GetVersion(ctx, st, ver) }},
			// The change feed is a memfs extension: held to its family's
			// list call.
			{"Changes (extension)", key,
				func(c anthropic.Client) {
					c.Beta.MemoryStores.Memories.List(ctx, st, anthropic.BetaMemoryStoreMemoryListParams{})
				},
				func(c *client.Client) { c.Changes(ctx, st, 0, 1, 0) }},
		}...)
	}
	calls = append(calls, []call{
		{"RedactVersion", protoAdminKey,
			func(c anthropic.Client) {
				c.Beta.MemoryStores.MemoryVersions.Redact(ctx, ver, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: st})
			},
			func(c *client.Client) { c.RedactVersion(ctx, st, ver) }},
		// Environments and sessions, with the admin key.
		{"CreateEnvironment", protoAdminKey,
			func(c anthropic.Client) { c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "e"}) },
			func(c *client.Client) { c.CreateEnvironment(ctx, client.CreateEnvironmentInput{Name: "e"}) }},
		{"GetEnvironment", protoAdminKey,
			func(c anthropic.Client) { c.Beta.Environments.Get(ctx, env, anthropic.BetaEnvironmentGetParams{}) },
			func(c *client.Client) { c.GetEnvironment(ctx, env) }},
		{"EnqueueHealthcheck (extension)", protoAdminKey,
			func(c anthropic.Client) {
				c.Beta.Environments.Archive(ctx, env, anthropic.BetaEnvironmentArchiveParams{})
			},
			func(c *client.Client) { c.EnqueueHealthcheck(ctx, env) }},
		// Agents, with the admin key.
		{"CreateAgent", protoAdminKey,
			func(c anthropic.Client) { c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "a"}) },
			func(c *client.Client) { c.CreateAgent(ctx, map[string]any{"name": "a"}) }},
		{"GetAgent", protoAdminKey,
			func(c anthropic.Client) { c.Beta.Agents.Get(ctx, "agent_1", anthropic.BetaAgentGetParams{}) },
			func(c *client.Client) { c.GetAgent(ctx, "agent_1") }},
		{"ListAgents", protoAdminKey,
			func(c anthropic.Client) { c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{}) },
			func(c *client.Client) { c.ListAgents(ctx, 0, "") }},
		{"CreateSession", protoAdminKey,
			func(c anthropic.Client) {
				c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: env})
			},
			func(c *client.Client) { c.CreateSession(ctx, client.CreateSessionInput{EnvironmentID: env}) }},
		{"GetSession", protoAdminKey,
			func(c anthropic.Client) { c.Beta.Sessions.Get(ctx, sess, anthropic.BetaSessionGetParams{}) },
			func(c *client.Client) { c.GetSession(ctx, sess) }},
		{"ArchiveSession", protoAdminKey,
			func(c anthropic.Client) { c.Beta.Sessions.Archive(ctx, sess, anthropic.BetaSessionArchiveParams{}) },
			func(c *client.Client) { c.ArchiveSession(ctx, sess) }},
		{"ListEvents", protoAdminKey,
			func(c anthropic.Client) {
				c.Beta.Sessions.Events.List(ctx, sess, anthropic.BetaSessionEventListParams{})
			},
			func(c *client.Client) { c.ListEvents(ctx, sess, client.ListEventsOptions{}) }},
		{"SendEvents", protoAdminKey,
			func(c anthropic.Client) {
				c.Beta.Sessions.Events.Send(ctx, sess, anthropic.BetaSessionEventSendParams{})
			},
			func(c *client.Client) {
				c.SendEvents(ctx, sess, []json.RawMessage{json.RawMessage(`{"type":"user.message"}`)})
			}},
		// The work queue, with the environment key, as the SDK's
		// lib/environments poller sends it.
		{"PollWork", protoEnvKey,
			func(c anthropic.Client) {
				c.Beta.Environments.Work.Poll(ctx, env, anthropic.BetaEnvironmentWorkPollParams{AnthropicWorkerID: param.NewOpt("w1")})
			},
			func(c *client.Client) { c.PollWork(ctx, env, "w1", 0) }},
		{"AckWork", protoEnvKey,
			func(c anthropic.Client) {
				c.Beta.Environments.Work.Ack(ctx, work, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: env})
			},
			func(c *client.Client) { c.AckWork(ctx, env, work) }},
		// A session's own calls, with its session token, as the SDK's
		// lib/environments worker sends them.
		{"Heartbeat", protoToken,
			func(c anthropic.Client) {
				c.Beta.Environments.Work.Heartbeat(ctx, work, anthropic.BetaEnvironmentWorkHeartbeatParams{EnvironmentID: env, ExpectedLastHeartbeat: param.NewOpt("NO_HEARTBEAT")})
			},
			func(c *client.Client) { c.Heartbeat(ctx, env, work, "NO_HEARTBEAT", 0) }},
		{"StopWork", protoToken,
			func(c anthropic.Client) {
				c.Beta.Environments.Work.Stop(ctx, work, anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: env,
					BetaSelfHostedWorkStopRequest: anthropic.BetaSelfHostedWorkStopRequestParam{Force: param.NewOpt(true)}})
			},
			func(c *client.Client) { c.StopWork(ctx, env, work, true) }},
		{"GetSession (session token)", protoToken,
			func(c anthropic.Client) { c.Beta.Sessions.Get(ctx, sess, anthropic.BetaSessionGetParams{}) },
			func(c *client.Client) { c.GetSession(ctx, sess) }},
		{"ListEvents (session token)", protoToken,
			func(c anthropic.Client) {
				c.Beta.Sessions.Events.List(ctx, sess, anthropic.BetaSessionEventListParams{})
			},
			func(c *client.Client) { c.ListEvents(ctx, sess, client.ListEventsOptions{}) }},
		{"SendEvents (session token)", protoToken,
			func(c anthropic.Client) {
				c.Beta.Sessions.Events.Send(ctx, sess, anthropic.BetaSessionEventSendParams{})
			},
			func(c *client.Client) {
				c.SendEvents(ctx, sess, []json.RawMessage{json.RawMessage(`{"type":"agent.message"}`)})
			}},
		{"StreamEvents (session token)", protoToken,
			func(c anthropic.Client) {
				s := c.Beta.Sessions.Events.StreamEvents(ctx, sess, anthropic.BetaSessionEventStreamParams{})
				for s.Next() {
				}
				s.Close()
			},
			func(c *client.Client) {
				if s, err := c.StreamEvents(ctx, sess); err == nil {
					s.Close()
				}
			}},
	}...)

	for _, k := range calls {
		t.Run(k.name+"/"+strings.TrimPrefix(k.key, "sk-memfs-"), func(t *testing.T) {
			k.sdk(sdkFor(k.key))
			sdk := wireOf(rec.take(t, "the SDK"), k.key)
			k.memfs(memfsFor(k.key))
			got := wireOf(rec.take(t, "memfs"), k.key)
			extension := strings.HasSuffix(k.name, "(extension)")
			switch {
			case !extension && got.route != sdk.route:
				t.Errorf("route: memfs %s, the SDK %s", got.route, sdk.route)
			case extension && got.route == sdk.route:
				t.Errorf("route: an extension is held to a different SDK route, both are %s", got.route)
			}
			if got.version != sdk.version || got.version != store.APIVersion {
				t.Errorf("anthropic-version: memfs %q, the SDK %q, store.APIVersion %q", got.version, sdk.version, store.APIVersion)
			}
			if !slices.Equal(got.betas, sdk.betas) {
				t.Errorf("anthropic-beta: memfs %q, the SDK %q", got.betas, sdk.betas)
			}
			if !slices.Equal(got.credential, sdk.credential) {
				t.Errorf("credential: memfs %q, the SDK %q", got.credential, sdk.credential)
			}
			if !slices.Equal(got.names, sdk.names) {
				t.Errorf("header names:\n memfs   %q\n the SDK %q", got.names, sdk.names)
			}
			if !strings.HasPrefix(got.ua, "memfs") || !strings.HasPrefix(sdk.ua, "Anthropic/Go") {
				t.Errorf("User-Agent: memfs %q (want memfs's own), the SDK %q", got.ua, sdk.ua)
			}
		})
	}
}
