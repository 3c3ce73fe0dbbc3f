package zkrecipes

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// ServiceTransport is an [http.RoundTripper] that sends a request for a
// URL "zk://<service>/path?query" to an instance of the service, picked by
// a [Provider] of the service (one per service, made at its first request
// and kept until Close): the URL becomes "https://<address>:<sslPort>/..."
// if the instance has an SSL port, else "http://<address>:<port>/...". A
// request that fails at the transport, or whose answer IsFailure calls a
// failure, is reported to the Provider (see [DownPolicy]); the request is
// not retried. Other URLs go to Base unchanged.
//
// A ServiceTransport is safe for concurrent use once its fields are set.
type ServiceTransport struct {
	Discovery *Discovery
	// Base sends the rewritten requests (nil: http.DefaultTransport).
	Base http.RoundTripper
	// Options configure each service's Provider.
	Options []ProviderOption
	// IsFailure tells whether an answer counts as the instance failing (nil:
	// a status 502, 503 or 504).
	IsFailure func(*http.Response) bool

	mu        sync.Mutex
	providers map[string]*Provider
	closed    bool
}

// RoundTrip implements http.RoundTripper. The first request for a service
// loads its ServiceCache, within the request's context.
func (t *ServiceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.URL.Scheme != "zk" {
		return base.RoundTrip(req)
	}
	closeBody := func() {
		if req.Body != nil {
			req.Body.Close()
		}
	}
	p, err := t.provider(req)
	if err != nil {
		closeBody()
		return nil, err
	}
	in, err := p.Instance()
	if err != nil {
		closeBody()
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	out := req.Clone(req.Context())
	u := *req.URL
	u.Scheme, u.Host = "http", net.JoinHostPort(in.Address, strconv.Itoa(in.Port))
	if in.SSLPort != 0 {
		u.Scheme, u.Host = "https", net.JoinHostPort(in.Address, strconv.Itoa(in.SSLPort))
	}
	out.URL, out.Host = &u, ""
	resp, err := base.RoundTrip(out)
	failed := err != nil && req.Context().Err() == nil
	if err == nil {
		if t.IsFailure != nil {
			failed = t.IsFailure(resp)
		} else {
			failed = resp.StatusCode == 502 || resp.StatusCode == 503 || resp.StatusCode == 504
		}
	}
	if failed {
		p.NoteError(in)
	}
	return resp, err
}

// provider returns the Provider of the request's service, made if needed.
func (t *ServiceTransport) provider(req *http.Request) (*Provider, error) {
	name := req.URL.Hostname()
	if t.Discovery == nil {
		return nil, fmt.Errorf("%w: ServiceTransport without a Discovery", ErrInvalidArgument)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), ErrStreamClosed)
	}
	p := t.providers[name]
	t.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := t.Discovery.Provider(req.Context(), name, t.Options...)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if q := t.providers[name]; q != nil || t.closed {
		p.Close() // another request made it meanwhile, or Close was called
		if q == nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), ErrStreamClosed)
		}
		return q, nil
	}
	if t.providers == nil {
		t.providers = make(map[string]*Provider)
	}
	t.providers[name] = p
	return p, nil
}

// Close closes the Providers; requests for a service fail afterwards.
func (t *ServiceTransport) Close() error {
	t.mu.Lock()
	ps := t.providers
	t.providers, t.closed = nil, true
	t.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
