package main

// Every command that calls memfs serve over HTTP (the admin commands,
// mount, replay, worker, session) takes --ca-file and --insecure-http:
// the certificates to trust for an https:// --api-url, and the consent to
// send a key over plain http:// to a host that is not this one. The
// refusal itself is store/client's (Options.AllowInsecureHTTP), so no
// client path can miss it; this file maps the flags onto it and words the
// refusal as what to do.

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/memfs/memfs/store/client"
)

// Environment variables of the flags below.
const (
	envCAFile       = "MEMFS_CA_FILE"
	envInsecureHTTP = "MEMFS_INSECURE_HTTP"
)

// insecureHTTPFix is what to do about a refused plain http:// URL.
const insecureHTTPFix = "use https:// with memfs serve --tls-cert-file FILE --tls-key-file FILE (and --ca-file FILE here, for a certificate of a private CA), " +
	"or --insecure-http (env " + envInsecureHTTP + "=true) if the network is trusted"

// apiTLSFlags are --ca-file and --insecure-http. Like the key flags they
// have no default from the environment (--help would print it): resolve
// reads the environment when a flag is not given.
type apiTLSFlags struct {
	caFile   string
	insecure optBool
}

func (f *apiTLSFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.caFile, "ca-file", "", "a file of PEM certificates to trust for an https:// --api-url, besides the system's (the CA of memfs serve's --tls-cert-file; env "+envCAFile+")")
	fs.Var(&f.insecure, "insecure-http", "send the key over plain http:// to a host that is not this one (not localhost, 127.0.0.0/8 or ::1); without it such a URL is refused, as anyone on the network could read the key (env "+envInsecureHTTP+"=true)")
}

// apiTLS is what apiTLSFlags come to.
type apiTLS struct {
	caFile       string
	insecureHTTP bool
}

// resolve reads the flags, else the environment (getenv). A CA file that
// can't be read or holds no certificate, and a MEMFS_INSECURE_HTTP that
// is not a boolean, are usage errors, found before any connection.
func (f *apiTLSFlags) resolve(getenv func(string) string) (apiTLS, error) {
	t := apiTLS{caFile: f.caFile, insecureHTTP: f.insecure.v}
	if t.caFile == "" {
		t.caFile = getenv(envCAFile)
	}
	if !f.insecure.set {
		if v := getenv(envInsecureHTTP); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return t, usagef("%s must be true or false, not %q", envInsecureHTTP, v)
			}
			t.insecureHTTP = b
		}
	}
	if t.caFile != "" {
		if _, err := client.NewTransport(t.caFile); err != nil {
			return t, usagef("--ca-file: %s", strings.TrimPrefix(err.Error(), "client: "))
		}
	}
	return t, nil
}

// options sets o's CAFile and AllowInsecureHTTP.
func (t apiTLS) options(o client.Options) client.Options {
	o.CAFile, o.AllowInsecureHTTP = t.caFile, t.insecureHTTP
	return o
}

// clientUsage turns an error building a client (or a worker, which builds
// its clients) into a usage error, exit 2: the URL or a client setting is
// wrong and nothing was sent. A refused plain http:// URL says what to do.
func clientUsage(err error) error {
	msg := strings.Replace(err.Error(), "client: ", "", 1)
	if errors.As(err, new(*client.InsecureHTTPError)) {
		return usagef("%s; %s", msg, insecureHTTPFix)
	}
	return usagef("%s", msg)
}

// optBool is a boolean flag that knows whether it was given, so that an
// environment variable counts only when it was not.
type optBool struct{ set, v bool }

func (b *optBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.v)
}

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, not %q", s)
	}
	b.set, b.v = true, v
	return nil
}

// IsBoolFlag lets the flag be given bare (--insecure-http).
func (b *optBool) IsBoolFlag() bool { return true }
