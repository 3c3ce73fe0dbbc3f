package fencing_test

import (
	"net/http"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/fencing"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// What the documentation says fits, fits.
var (
	_ fencing.TokenSource = (*zkrecipes.Mutex)(nil)
	_ fencing.TokenSource = (*zkrecipes.RWMutex)(nil)
	_ fencing.TokenSource = (*zkrecipes.Election)(nil)
	_ fencing.Conn        = (*zkrecipes.Session)(nil)
	_ fencing.Conn        = (*zkclient.Client)(nil)
	_ http.RoundTripper   = (*fencing.Transport)(nil)
)
