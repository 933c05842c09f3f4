package main

// memfs serve --tls-cert-file F --tls-key-file F serves HTTPS. The pair
// is read at start (a bad one is a usage error, before anything is
// created) and again on every SIGHUP: a good new pair replaces the old
// one for the handshakes that follow (connections already open keep
// theirs); a bad one is logged and the old one goes on serving, so a
// certificate renewal that went wrong never takes the service down.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/sirupsen/logrus"
)

// certPair is the certificate memfs serve presents, read from its files.
// Every handshake reads the current one; reload swaps it whole.
type certPair struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// loadCertPair reads the pair a first time.
func loadCertPair(certFile, keyFile string) (*certPair, error) {
	p := &certPair{certFile: certFile, keyFile: keyFile}
	if err := p.reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// reload reads the files again and serves the new pair from the next
// handshake on. On an error the current pair stays.
func (p *certPair) reload() error {
	c, err := readCertPair(p.certFile, p.keyFile)
	if err != nil {
		return err
	}
	p.cur.Store(c)
	return nil
}

// readCertPair reads a PEM certificate (chain) and its private key, and
// checks that they belong together and that the leaf parses.
func readCertPair(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("the TLS pair --tls-cert-file %s, --tls-key-file %s: %w", certFile, keyFile, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("the TLS certificate %s: %w", certFile, err)
		}
	}
	return &c, nil
}

// config is the server's TLS configuration: TLS 1.2 or later, the
// current pair at each handshake.
func (p *certPair) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.cur.Load(), nil
		},
	}
}

// watchReload reloads p on each SIGHUP until ctx ends; stop waits for its
// goroutine. It is the only code that swaps the pair.
func (p *certPair) watchReload(ctx context.Context, log logrus.FieldLogger) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
			if err := p.reload(); err != nil {
				log.WithError(err).Error("SIGHUP: the new TLS pair is not usable; still serving the previous certificate")
				continue
			}
			leaf := p.cur.Load().Leaf
			log.WithFields(logrus.Fields{"subject": leaf.Subject.String(), "not_after": leaf.NotAfter}).Info("SIGHUP: reloaded the TLS certificate")
		}
	}()
	return func() {
		// Ignore, not Stop: a SIGHUP after this must not kill a serve
		// that is finishing its requests (its default action).
		signal.Ignore(syscall.SIGHUP)
		cancel()
		<-done
	}
}
