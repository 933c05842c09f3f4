package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults of Options.
const (
	DefaultRetryMax     = 4
	DefaultRetryWaitMin = 100 * time.Millisecond
	DefaultRetryWaitMax = 5 * time.Second
	DefaultTimeout      = 30 * time.Second
	DefaultUserAgent    = "memfs-client"
)

// Options configure a Client. The zero value of every field but BaseURL and
// APIKey selects its documented default.
type Options struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:8080 or
	// https://memfs.example:8443 (required). Request paths (/v1/...) are
	// appended to it, after any path it has. Plain http:// is for loopback
	// hosts only, unless AllowInsecureHTTP.
	BaseURL string
	// APIKey is the credential (required): an admin key, an environment
	// key or a session token. Every kind is sent as Authorization: Bearer,
	// as the official SDK sends each (protocol.go).
	APIKey string
	// HTTPClient sends the requests (default: a pooled client of
	// github.com/hashicorp/go-cleanhttp with NewTransport's transport).
	// Its Transport is wrapped to apply Timeout per attempt; the client
	// itself is not modified. It excludes CAFile.
	HTTPClient *http.Client
	// CAFile, when set, is a file of PEM certificates trusted for https://
	// on top of the system's roots (NewTransport), e.g. the CA that signed
	// memfs serve's --tls-cert-file.
	CAFile string
	// AllowInsecureHTTP lets the client send APIKey over plain http:// to
	// a host that is not a loopback address (localhost, 127.0.0.0/8, ::1).
	// Without it Validate refuses such a BaseURL with an
	// *InsecureHTTPError, before any connection: the key would cross the
	// network in the clear.
	AllowInsecureHTTP bool
	// RetryMax is how many times a failed attempt is retried (default 4;
	// a negative value disables retries).
	RetryMax int
	// RetryWaitMin is the shortest wait before a retry (default 100 ms).
	RetryWaitMin time.Duration
	// RetryWaitMax caps every wait before a retry, including one the
	// server asks for with retry-after (default 5 s).
	RetryWaitMax time.Duration
	// Timeout bounds one attempt, from sending the request to reading the
	// whole response (default 30 s). A change-feed long poll gets its wait
	// on top.
	Timeout time.Duration
	// UserAgent is sent as User-Agent (default "memfs-client"): memfs's
	// own, never the SDK's.
	UserAgent string
	// Logger receives one debug line per attempt and retry (default: no
	// logging). Errors are returned, not logged.
	Logger logrus.FieldLogger
}

// Validate checks the options and fills in the defaults.
func (o *Options) Validate() error {
	if o.BaseURL == "" {
		return errors.New("client: BaseURL is required (e.g. http://127.0.0.1:8080)")
	}
	if err := CheckBaseURL(o.BaseURL, o.AllowInsecureHTTP); err != nil {
		return err
	}
	if o.APIKey == "" {
		return errors.New("client: APIKey is required (an admin key or a session token)")
	}
	if o.CAFile != "" && o.HTTPClient != nil {
		return errors.New("client: CAFile and HTTPClient are exclusive: give HTTPClient a transport from NewTransport(CAFile) instead")
	}
	switch {
	case o.RetryMax == 0:
		o.RetryMax = DefaultRetryMax
	case o.RetryMax < 0:
		o.RetryMax = 0
	}
	if o.RetryWaitMin <= 0 {
		o.RetryWaitMin = DefaultRetryWaitMin
	}
	if o.RetryWaitMax <= 0 {
		o.RetryWaitMax = DefaultRetryWaitMax
	}
	if o.RetryWaitMax < o.RetryWaitMin {
		return fmt.Errorf("client: RetryWaitMax (%s) is shorter than RetryWaitMin (%s)", o.RetryWaitMax, o.RetryWaitMin)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	return nil
}
