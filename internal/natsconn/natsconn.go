// Package natsconn gives ragwatch its one NATS connection: to an embedded nats-server with
// JetStream (the default) or to an external cluster, with reconnects, state logging and the
// ragwatch_nats_connected gauge. Every NATS user (ingest, scoring queue, alert state) shares it.
package natsconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/listen"
	"github.com/ragwatch/ragwatch/internal/secret"
)

// Conn is the shared NATS connection. NC and JS are safe for concurrent use.
type Conn struct {
	NC *nats.Conn
	JS jetstream.JetStream
	// Replicas is the replication factor for streams and buckets ragwatch creates.
	Replicas int
	// MaxPayload is the configured message size limit.
	MaxPayload int

	server     *server.Server // nil when connected to an external cluster
	ragwatch   Credential     // embedded: ragwatch's own user
	app        Credential     // embedded: the app's publish-only user
	logger     *slog.Logger
	closed     chan struct{} // closed by the client's ClosedHandler
	closeOnce  sync.Once
	healthOnce sync.Once // stops store.run
	connected  prometheus.Gauge

	store      *StoreHealth  // nil when connected to an external cluster
	stopHealth chan struct{} // stops store.run
	healthDone chan struct{} // closed when store.run returned
}

// Connect starts the embedded server (no nats.url) or connects to the configured cluster. It
// fails fast with a message naming the config key when the embedded port is taken, the store
// dir is not writable or the cluster cannot be reached.
func Connect(ctx context.Context, cfg Config, reg prometheus.Registerer, logger *slog.Logger) (*Conn, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{
		Replicas:   max(cfg.Replicas, 1),
		MaxPayload: cfg.MaxPayload,
		logger:     logger,
		closed:     make(chan struct{}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ragwatch_nats_connected",
			Help: "1 while the NATS connection is up, 0 while it is down or reconnecting.",
		}),
	}
	reconnects := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ragwatch_nats_reconnects_total",
		Help: "Times the NATS connection was re-established after a disconnect.",
	})
	if err := reg.Register(c.connected); err != nil {
		return nil, fmt.Errorf("register NATS metrics: %w", err)
	}
	if err := reg.Register(reconnects); err != nil {
		return nil, fmt.Errorf("register NATS metrics: %w", err)
	}

	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(backoff(cfg.ReconnectWait, cfg.ReconnectMaxWait)),
		nats.Timeout(cfg.ConnectTimeout),
		// The server does not hand this connection's own publications back to its
		// subscriptions: the scores subscription would only skip this process's results
		// (queue.Loopback hands them over in process), after the server routed them and the
		// client parsed them. Nothing else here publishes what it subscribes to; JetStream's
		// streams, consumers and replies come from the server's own clients.
		nats.NoEcho(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.connected.Set(0)
			if err != nil {
				logger.Warn("NATS disconnected; reconnecting", "err", err)
			} else {
				logger.Info("NATS disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.connected.Set(1)
			reconnects.Inc()
			logger.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			c.connected.Set(0)
			c.closeOnce.Do(func() { close(c.closed) })
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			logger.Warn("NATS async error", "subject", subj, "err", err)
		}),
	}

	var urls string
	if cfg.IsEmbedded() {
		health := newStoreHealth(cfg.StoreDir, storeProbeEvery, reg, logger)
		s, own, app, err := startEmbedded(cfg, health.serverError, logger)
		if err != nil {
			return nil, err
		}
		c.server, c.ragwatch, c.app, c.store = s, own, app, health
		opts = append(opts, nats.InProcessServer(s), own.Option())
		logger.Info("embedded NATS started", "endpoint", s.Addr().String(), "store_dir", cfg.StoreDir)
	} else {
		auth, err := authOptions(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, auth...)
		urls = joinServers(cfg.Servers())
	}

	nc, err := connectCtx(ctx, urls, opts)
	if err != nil {
		c.stopServer()
		where := "embedded server"
		if urls != "" {
			where = cfg.URL.String() // as SecretURL prints it: also user:pass@host without a scheme
		}
		return nil, fmt.Errorf("connect to NATS (%s; check `nats.url` and credentials): %w", where, err)
	}
	c.NC = nc
	c.connected.Set(1)
	if !cfg.IsEmbedded() {
		logger.Info("NATS connected", "server", nc.ConnectedUrlRedacted())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	c.JS = js
	if c.store != nil {
		c.store.reloaded = func() {
			if err := nc.ForceReconnect(); err != nil {
				logger.Warn("reconnect to NATS after reloading the streams", "err", err)
			}
		}
		c.stopHealth, c.healthDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(c.healthDone)
			c.store.run(c.server, c.stopHealth)
		}()
	}
	return c, nil
}

// Store is the embedded server's store health: which streams fail writes (nil, whose methods
// report nothing, when connected to an external cluster).
func (c *Conn) Store() *StoreHealth { return c.store }

// KeyValue creates or opens the KV bucket; ttl > 0 expires entries after it, maxBytes caps it
// (puts fail once it is full). History is 1: ragwatch keeps state, not history.
func (c *Conn) KeyValue(ctx context.Context, bucket string, ttl time.Duration, maxBytes int64) (jetstream.KeyValue, error) {
	return c.keyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, TTL: ttl, MaxBytes: maxBytes, History: 1})
}

// VersionedKeyValue is KeyValue for a bucket whose keys keep their last history values (at
// most 64), without expiry: the label calibration maps, whose earlier versions stay readable.
func (c *Conn) VersionedKeyValue(ctx context.Context, bucket string, history uint8, maxBytes int64) (jetstream.KeyValue, error) {
	return c.keyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, MaxBytes: maxBytes, History: history})
}

func (c *Conn) keyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Storage, cfg.Replicas = jetstream.FileStorage, c.Replicas
	bucket := cfg.Bucket
	kv, err := c.JS.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open NATS KV bucket %s: %w", bucket, err)
	}
	if c.store != nil {
		return guardedKV{KeyValue: kv, health: c.store, stream: "KV_" + bucket}, nil
	}
	return kv, nil
}

// Embedded reports whether ragwatch runs its own server.
func (c *Conn) Embedded() bool { return c.server != nil }

// ClientURL is the URL other processes use to reach the embedded server ("" when external).
func (c *Conn) ClientURL() string {
	if c.server == nil {
		return ""
	}
	return c.server.ClientURL()
}

// AppCredential is the embedded server's publish-only user for the application (records,
// feedback and OTLP subjects); zero when connected to an external cluster.
func (c *Conn) AppCredential() Credential { return c.app }

// Close drains the connection (in-flight messages finish, subscriptions stop, buffered
// publishes flush), then stops the embedded server. Safe to call more than once.
func (c *Conn) Close() {
	if c.NC != nil && !c.NC.IsClosed() {
		// Draining needs the server: while disconnected there is nothing to flush to, and a
		// drain would only wait out its timeout.
		if !c.NC.IsConnected() {
			c.NC.Close()
		} else if err := c.NC.Drain(); err != nil {
			c.NC.Close()
		}
		select {
		case <-c.closed:
		case <-time.After(10 * time.Second):
			c.logger.Warn("NATS drain did not finish in 10s; closing")
			c.NC.Close()
		}
	}
	c.connected.Set(0)
	if c.stopHealth != nil {
		c.healthOnce.Do(func() { close(c.stopHealth) })
		<-c.healthDone
	}
	c.stopServer()
}

func (c *Conn) stopServer() {
	if c.server == nil {
		return
	}
	c.server.Shutdown()
	c.server.WaitForShutdown()
}

func connectCtx(ctx context.Context, urls string, opts []nats.Option) (*nats.Conn, error) {
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(urls, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		return r.nc, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// backoff doubles the wait per attempt from first up to maxWait, with ±20% jitter so a fleet
// of sidecars does not reconnect in lockstep.
func backoff(first, maxWait time.Duration) nats.ReconnectDelayHandler {
	if first <= 0 {
		first = time.Second
	}
	if maxWait < first {
		maxWait = first
	}
	return func(attempts int) time.Duration {
		d := first
		for i := 1; i < attempts && d < maxWait; i++ {
			d *= 2
		}
		d = min(d, maxWait)
		jitter := time.Duration(time.Now().UnixNano() % int64(d/5+1))
		return d - d/10 + jitter
	}
}

func joinServers(s []string) string {
	out := ""
	for i, u := range s {
		if i > 0 {
			out += ","
		}
		out += u
	}
	return out
}

func authOptions(cfg Config) ([]nats.Option, error) {
	var opts []nats.Option
	if cfg.CredentialsFile != "" {
		if _, err := os.Stat(cfg.CredentialsFile); err != nil {
			return nil, fmt.Errorf("`nats.credentials_file`: %w", err)
		}
		opts = append(opts, nats.UserCredentials(cfg.CredentialsFile))
	}
	if cfg.TokenEnv != "" || cfg.TokenFile != "" {
		tok, err := secret.Read(cfg.TokenEnv, cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("NATS token (`nats.token_env` / `nats.token_file`): %w", err)
		}
		opts = append(opts, nats.Token(tok.Reveal()))
	}
	if cfg.User != "" {
		pw, err := secret.Read(cfg.PasswordEnv, cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("NATS password (`nats.password_env` / `nats.password_file`): %w", err)
		}
		opts = append(opts, nats.UserInfo(cfg.User, pw.Reveal()))
	}
	t := cfg.TLS
	if t.CAFile != "" || t.CertFile != "" || t.InsecureSkipVerify {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // operator's explicit choice
		if t.CAFile != "" {
			pem, err := os.ReadFile(t.CAFile)
			if err != nil {
				return nil, fmt.Errorf("`nats.tls.ca_file`: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("`nats.tls.ca_file` %s: no PEM certificate found", t.CAFile)
			}
			tc.RootCAs = pool
		}
		if t.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("`nats.tls.cert_file`/`key_file`: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

// startEmbedded starts nats-server with JetStream in cfg.StoreDir, listening on
// cfg.Embedded.Endpoint (port 0 or -1 picks a free port). The server requires a user and
// password from every client: ragwatch's own and the app's (see resolveUsers).
func startEmbedded(cfg Config, onError func(string), logger *slog.Logger) (*server.Server, Credential, Credential, error) {
	var own, app Credential
	fail := func(err error) (*server.Server, Credential, Credential, error) {
		return nil, Credential{}, Credential{}, err
	}
	host, portStr, err := net.SplitHostPort(cfg.Embedded.Endpoint)
	if err != nil {
		return fail(fmt.Errorf("`nats.embedded.endpoint` %q: %w", cfg.Embedded.Endpoint, err))
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fail(fmt.Errorf("`nats.embedded.endpoint` %q: port is not a number", cfg.Embedded.Endpoint))
	}
	if err := checkWritable(cfg.StoreDir); err != nil {
		return fail(err)
	}
	if own, app, err = resolveUsers(cfg, logger); err != nil {
		return fail(err)
	}
	if port > 0 {
		// Check first so the message is clear; nats-server alone only logs it.
		l, err := net.Listen("tcp", cfg.Embedded.Endpoint)
		if err != nil {
			return fail(fmt.Errorf("embedded NATS cannot listen on %s (`nats.embedded.endpoint`): %w; "+
				"is another ragwatch or nats-server running? Pick another port or set `nats.url` to use it", cfg.Embedded.Endpoint, err))
		}
		_ = l.Close()
	}
	ownAcc, appAcc, err := serverAccounts(cfg.Subjects, cfg.Consume.Mode)
	if err != nil {
		return fail(err)
	}
	users, err := serverUsers(cfg.Subjects, own, app, appAcc)
	if err != nil {
		return fail(err)
	}
	opts := &server.Options{
		ServerName: "ragwatch",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		// The streams' caps are reserved against it (config.CheckStorage): the store dir stays
		// within its volume.
		JetStreamMaxStore: cfg.Embedded.MaxStore,
		MaxPayload:        int32(cfg.MaxPayload),
		// The client port is a listener like the HTTP and OTLP ones: a flood of connections
		// to it (authenticated or not: nats-server counts them from the accept) takes at
		// most one listener's share of the memory and fds, not the store's reserve.
		MaxConn: listen.ProcessBudget().Caps().PerListener,
		NoSigs:  true,
		NoLog:   false,
		// Two accounts: the app's reaches ragwatch's only through the ingest subjects
		// (serverAccounts says why).
		Accounts: []*server.Account{ownAcc, appAcc},
		Users:    users,
	}
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = 8 << 20
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fail(fmt.Errorf("embedded NATS: %w", err))
	}
	sl := &serverLogger{logger: logger.With("component", "nats-server"), onError: onError}
	s.SetLogger(sl, false, false)
	s.Start()
	if msg := sl.fatal(); msg != "" {
		s.Shutdown()
		s.WaitForShutdown()
		return fail(fmt.Errorf("embedded NATS on %s with store %s: %s", cfg.Embedded.Endpoint, cfg.StoreDir, msg))
	}
	// With accounts configured, nats-server enables JetStream only where asked; the
	// global account holds ragwatch's streams and buckets (and recovers them from the store),
	// the app's account none.
	if err := s.GlobalAccount().EnableJetStream(nil, nil); err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		return fail(fmt.Errorf("embedded NATS: enable JetStream with store %s: %w", cfg.StoreDir, err))
	}
	if err := readyErr(s); err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		return fail(fmt.Errorf("embedded NATS on %s (`nats.embedded.endpoint`): %w", cfg.Embedded.Endpoint, err))
	}
	return s, own, app, nil
}

func readyErr(s *server.Server) error {
	if !s.ReadyForConnections(10 * time.Second) {
		return errors.New("not ready for connections after 10s")
	}
	if !s.JetStreamEnabled() || !s.GlobalAccount().JetStreamEnabled() {
		return errors.New("JetStream did not start")
	}
	return nil
}

// checkWritable creates dir and proves a file can be written in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("NATS store dir %s (`nats.store_dir`) cannot be created: %w", dir, err)
	}
	if err := writeProbe(dir, 0); err != nil {
		return fmt.Errorf("NATS store dir %s (`nats.store_dir`) is not writable: %w", dir, err)
	}
	return nil
}

// serverLogger routes nats-server logs to slog and keeps the first fatal message: nats-server
// reports startup failures (port, JetStream store) only through Fatalf.
type serverLogger struct {
	logger  *slog.Logger
	onError func(msg string) // sees every error line (StoreHealth.serverError); may be nil
	mu      sync.Mutex
	first   string
}

func (l *serverLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

func (l *serverLogger) Noticef(format string, v ...any) { l.logger.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.logger.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.logger.Error(msg)
	if l.onError != nil {
		l.onError(msg)
	}
}
func (l *serverLogger) Debugf(format string, v ...any) { l.logger.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any) {}
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.logger.Error(msg)
	l.mu.Lock()
	if l.first == "" {
		l.first = msg
	}
	l.mu.Unlock()
}
