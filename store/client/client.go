package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/memfs/memfs/store"
)

// maxResponseBytes bounds a response body held in memory. The largest
// legitimate answer, a full-view page of 20 memories of 100 KiB with JSON
// escaping, is far below it.
const maxResponseBytes = 64 << 20

// Client calls the Memory Stores API. It is safe for concurrent use.
type Client struct {
	base    string // BaseURL without a trailing slash
	apiKey  string
	ua      string
	timeout time.Duration
	rc      *retryablehttp.Client
	// streams sends event-stream requests: no retries and no attempt
	// timeout, which would cut a stream that is meant to stay open.
	streams *http.Client
}

// New returns a client for opts (see Options for the defaults).
func New(opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var hc *http.Client
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		hc = &c
	} else {
		tr, err := NewTransport(opts.CAFile)
		if err != nil {
			return nil, err
		}
		hc = &http.Client{Transport: tr}
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	streams := &http.Client{Transport: base, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar}
	hc.Transport = &timeoutTransport{base: base, timeout: opts.Timeout}
	rc := &retryablehttp.Client{
		HTTPClient:   hc,
		RetryWaitMin: opts.RetryWaitMin,
		RetryWaitMax: opts.RetryWaitMax,
		RetryMax:     opts.RetryMax,
		CheckRetry:   checkRetry,
		Backoff:      retryWait,
		ErrorHandler: giveUp,
	}
	if opts.Logger != nil {
		rc.Logger = debugLogger{opts.Logger}
	}
	return &Client{
		base:    strings.TrimRight(opts.BaseURL, "/"),
		apiKey:  opts.APIKey,
		ua:      opts.UserAgent,
		timeout: opts.Timeout,
		rc:      rc,
		streams: streams,
	}, nil
}

// giveUp is retryablehttp's ErrorHandler: it hands back the last response
// (so that a final 503 is decoded like any other answer) and counts the
// attempts in a transport error.
func giveUp(resp *http.Response, err error, attempts int) (*http.Response, error) {
	if err != nil {
		return resp, fmt.Errorf("giving up after %d attempt(s): %w", attempts, err)
	}
	return resp, nil
}

// request is one API call.
type request struct {
	method string
	// path is already escaped, under the base URL, e.g. /v1/memory_stores/ID.
	path  string
	query url.Values
	// body, when not nil, is sent as JSON.
	body any
	// extraTimeout lengthens the attempt timeout (a long poll's wait).
	extraTimeout time.Duration
	// header holds extra request headers.
	header http.Header
}

// do sends req with retries and decodes a 2xx JSON answer into out (when
// not nil). Any other answer is returned as a *store.Error.
func (c *Client) do(ctx context.Context, req request, out any) error {
	u := c.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body any
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the request: %w", req.method, req.path, err)
		}
		body = b
	}
	if req.extraTimeout > 0 {
		ctx = context.WithValue(ctx, attemptTimeoutKey{}, c.timeout+req.extraTimeout)
	}
	hr, err := retryablehttp.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	c.setProtocol(hr.Header, req.path)
	hr.Header.Set("accept", "application/json")
	for k, vs := range req.header {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if body != nil {
		hr.Header.Set("content-type", "application/json")
	}
	// Read the whole body inside the retry loop, so that a response cut
	// short is retried like a lost one.
	hr.SetResponseHandler(readWholeBody)

	resp, err := c.rc.Do(hr)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", req.method, req.path, ctx.Err())
		}
		return noAnswer(c.base, req.method+" "+req.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("%w: %w", &store.Error{Kind: store.ErrUnavailable, Status: resp.StatusCode,
			Message: fmt.Sprintf("%s %s: reading the answer", req.method, req.path)}, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp, b)
	}
	if out == nil {
		return nil
	}
	if len(b) > maxResponseBytes {
		return &store.Error{Kind: store.ErrInternal, Status: resp.StatusCode, RequestID: resp.Header.Get("request-id"),
			Message: fmt.Sprintf("%s %s: the answer is over %d bytes", req.method, req.path, maxResponseBytes)}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &store.Error{Kind: store.ErrInternal, Status: resp.StatusCode, RequestID: resp.Header.Get("request-id"),
			Message: fmt.Sprintf("%s %s: the answer is not the expected JSON: %v", req.method, req.path, err)}
	}
	return nil
}

// readWholeBody replaces a response's body by its bytes, read in full; a
// read error makes retryablehttp retry the attempt.
func readWholeBody(resp *http.Response) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// storePath is /v1/memory_stores/{id} followed by the escaped elements.
func storePath(storeID string, elems ...string) string {
	var sb strings.Builder
	sb.WriteString("/v1/memory_stores/")
	sb.WriteString(url.PathEscape(storeID))
	for _, e := range elems {
		sb.WriteByte('/')
		sb.WriteString(e)
	}
	return sb.String()
}

func setTime(q url.Values, name string, t *time.Time) {
	if t != nil {
		q.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
}

func setInt(q url.Values, name string, n int) {
	if n > 0 {
		q.Set(name, fmt.Sprint(n))
	}
}

func setStr(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

func view(full bool) string {
	if full {
		return store.ViewFull
	}
	return store.ViewBasic
}
