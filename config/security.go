package config

import "github.com/ragwatch/ragwatch/internal/tlsauth"

// TLSServer turns on TLS for a listener; with client_ca_file it requires client certificates
// (mTLS). The type, its checks and the code that loads it live in internal/tlsauth.
type TLSServer = tlsauth.TLSServer

// BearerAuth requires `Authorization: Bearer <token>` from a token in an environment variable
// or a file; it lives in internal/tlsauth with the check.
type BearerAuth = tlsauth.BearerAuth
