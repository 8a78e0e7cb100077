package natsconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ragwatch/ragwatch/internal/fielderr"
	"github.com/ragwatch/ragwatch/internal/secret"
)

// The `nats:` settings live here, with the connection that uses them; config embeds them, as
// the OTel Collector's configtls does, so this package needs nothing from config.

// Config configures the embedded server or the connection to an external cluster, the subjects
// ragwatch reads records, OTLP traces and feedback from, and how it consumes them.
type Config struct {
	// URL lists the servers of an external cluster, comma-separated ("nats://a:4222,nats://b:4222").
	// "" starts the embedded server.
	URL      secret.URL `yaml:"url"`       // may hold user:password
	StoreDir string     `yaml:"store_dir"` // embedded JetStream storage
	Embedded Embedded   `yaml:"embedded"`

	// Name is the client connection name shown by `nats server report connections`.
	Name string `yaml:"name"`
	// CredentialsFile is a NATS .creds file (JWT + nkey seed); only with url.
	CredentialsFile string `yaml:"credentials_file"`
	// TokenEnv / TokenFile name where the auth token comes from (one of them); only with url.
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// User, with the password from PasswordEnv or PasswordFile, logs in to an external cluster
	// (instead of user info in `url`, which would put the password in the config); only with url.
	User         string `yaml:"user"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	TLS          TLS    `yaml:"tls"`

	// ReconnectWait is the first wait between reconnect attempts; it doubles per attempt up to
	// ReconnectMaxWait. ragwatch reconnects forever.
	ReconnectWait    time.Duration `yaml:"reconnect_wait"`
	ReconnectMaxWait time.Duration `yaml:"reconnect_max_wait"`
	// ConnectTimeout bounds the first connection at startup; ragwatch fails fast after it.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`

	// Replicas is the replication factor of the streams and KV buckets ragwatch creates
	// (1 for the embedded server; 3 is typical on a cluster).
	Replicas int `yaml:"replicas"`
	// MaxPayload bounds one message in bytes; bigger messages are rejected as too_large. The
	// embedded server is started with this limit.
	MaxPayload int `yaml:"max_payload"`

	Subjects Subjects `yaml:"subjects"`
	Consume  Consume  `yaml:"consume"`
}

// Embedded configures the embedded nats-server. It always requires credentials: an
// unauthenticated client is refused on connect, whatever address it listens on.
type Embedded struct {
	Endpoint string        `yaml:"endpoint"`
	Users    EmbeddedUsers `yaml:"users"`
	// MaxStore is the embedded server's JetStream file storage limit in bytes. Every stream and
	// bucket ragwatch creates reserves its max_bytes against it (config.CheckStorage), so the store
	// dir never outgrows its volume: the default fits the Kubernetes example's 512 MiB emptyDir.
	MaxStore int64 `yaml:"max_store"`
}

// EmbeddedUsers are the two users of the embedded server.
type EmbeddedUsers struct {
	// Ragwatch is ragwatch's own connection: every permission (streams, KV buckets, scores).
	Ragwatch User `yaml:"ragwatch"`
	// App is the application next to ragwatch, in an account of its own: it may publish on
	// the ingest subjects (Subjects) and subscribe on its own inbox, nothing else (no
	// JetStream API, and no reply subject of its reaches ragwatch's account).
	App User `yaml:"app"`
}

// User is one user of the embedded server. The password comes from PasswordEnv or
// PasswordFile; with neither, ragwatch generates one at first start into
// <store_dir>/nats-<role>.password (mode 0600), reuses it afterwards and logs the path.
type User struct {
	Name         string `yaml:"name"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
}

// TLS configures TLS to an external cluster.
type TLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Subjects are the subjects ragwatch reads from; "" disables one.
type Subjects struct {
	Records  string `yaml:"records"`   // JSON record or array of records
	OTLP     string `yaml:"otlp"`      // OTLP ExportTraceServiceRequest, protobuf
	OTLPLogs string `yaml:"otlp_logs"` // OTLP ExportLogsServiceRequest, protobuf (GenAI events)
	Feedback string `yaml:"feedback"`  // feedback JSON
	Labels   string `yaml:"labels"`    // human labels JSON
}

// Consume chooses how ragwatch consumes its subjects.
type Consume struct {
	// Mode is "core" (a queue subscription: at-most-once, N sidecars share the subjects) or
	// "jetstream" (a durable consumer on a stream with explicit acks: at-least-once).
	Mode       string `yaml:"mode"`
	QueueGroup string `yaml:"queue_group"` // core mode

	// JetStream mode. Stream is created (or updated) over the enabled subjects unless
	// CreateStream is false, in which case it must exist and capture them.
	Stream       string        `yaml:"stream"`
	CreateStream bool          `yaml:"create_stream"`
	StreamMaxAge time.Duration `yaml:"stream_max_age"`
	// StreamMaxBytes caps the intake stream when ragwatch creates it; beyond it the oldest
	// messages go (acked ones first in practice: the stream keeps messages for stream_max_age).
	StreamMaxBytes int64         `yaml:"stream_max_bytes"`
	Durable        string        `yaml:"durable"` // prefix; one durable per subject kind
	AckWait        time.Duration `yaml:"ack_wait"`
	MaxDeliver     int           `yaml:"max_deliver"`
	MaxAckPending  int           `yaml:"max_ack_pending"`

	// DedupWindow and DedupMax bound the duplicate detection (by trace id for records, by
	// stream sequence for redelivered messages). In jetstream mode the window is persisted in
	// the KV bucket DedupBucket so a restart still recognises redeliveries.
	DedupWindow time.Duration `yaml:"dedup_window"`
	DedupMax    int           `yaml:"dedup_max"`
	DedupBucket string        `yaml:"dedup_bucket"`
	// DedupMaxBytes caps the dedup bucket.
	DedupMaxBytes int64 `yaml:"dedup_max_bytes"`
}

// Consume modes.
const (
	ModeCore      = "core"
	ModeJetStream = "jetstream"
)

// DefaultConfig is the `nats:` section's defaults (docs/configuration.md).
func DefaultConfig() Config {
	return Config{
		StoreDir: "./ragwatch-data",
		Embedded: Embedded{Endpoint: "127.0.0.1:4222", MaxStore: 448 << 20, Users: EmbeddedUsers{
			Ragwatch: User{Name: "ragwatch"},
			App:      User{Name: "app"},
		}},
		Name:             "ragwatch",
		ReconnectWait:    time.Second,
		ReconnectMaxWait: 30 * time.Second,
		ConnectTimeout:   10 * time.Second,
		Replicas:         1,
		MaxPayload:       8 << 20,
		Subjects: Subjects{
			Records:  "ragwatch.records.>",
			OTLP:     "ragwatch.otlp.traces",
			OTLPLogs: "ragwatch.otlp.logs",
			Feedback: "ragwatch.feedback.>",
			Labels:   "ragwatch.labels.>",
		},
		Consume: Consume{
			Mode:           ModeCore,
			QueueGroup:     "ragwatch",
			Stream:         "RAGWATCH_INGEST",
			CreateStream:   true,
			StreamMaxAge:   24 * time.Hour,
			StreamMaxBytes: 128 << 20,
			Durable:        "ragwatch",
			AckWait:        30 * time.Second,
			MaxDeliver:     5,
			MaxAckPending:  1000,
			DedupWindow:    10 * time.Minute,
			DedupMax:       100000,
			DedupBucket:    "ragwatch_dedup",
			DedupMaxBytes:  16 << 20,
		},
	}
}

// IsEmbedded reports whether ragwatch starts its own server.
func (n Config) IsEmbedded() bool { return strings.TrimSpace(n.URL.Reveal()) == "" }

// Servers returns the server URLs of an external cluster.
func (n Config) Servers() []string {
	var out []string
	for _, s := range strings.Split(n.URL.Reveal(), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// maxPayload is the largest payload nats-server accepts.
const maxPayload = 64 << 20

// Validate returns every problem, naming the key relative to `nats` (config's walk adds the
// path and line).
func (n Config) Validate() error {
	var errs []error
	if n.IsEmbedded() {
		if strings.TrimSpace(n.StoreDir) == "" {
			errs = append(errs, fielderr.Invalid("store_dir", "must not be empty when the embedded server is used (no `url`)"))
		}
		if err := checkEmbeddedEndpoint(n.Embedded.Endpoint); err != nil {
			errs = append(errs, fielderr.Invalid("embedded.endpoint", "%v", err))
		}
		if n.Embedded.MaxStore <= 0 {
			errs = append(errs, fielderr.Invalid("embedded.max_store", "must be positive (bytes of JetStream file storage)"))
		}
		errs = append(errs, n.Embedded.Users.validate()...)
		for _, kv := range [][2]string{
			{"credentials_file", n.CredentialsFile}, {"token_env", n.TokenEnv}, {"token_file", n.TokenFile},
			{"user", n.User}, {"password_env", n.PasswordEnv}, {"password_file", n.PasswordFile},
			{"tls.ca_file", n.TLS.CAFile}, {"tls.cert_file", n.TLS.CertFile}, {"tls.key_file", n.TLS.KeyFile},
		} {
			if key, v := kv[0], kv[1]; v != "" {
				errs = append(errs, fielderr.Invalid(key, "applies only to an external cluster; set `url` or remove it"))
			}
		}
	} else {
		for _, s := range n.Servers() {
			if err := checkNATSURL(s); err != nil {
				errs = append(errs, fielderr.Invalid("url", "%v", err))
			}
		}
		if len(n.Servers()) == 0 {
			errs = append(errs, fielderr.Invalid("url", "must list at least one server"))
		}
	}
	if n.TokenEnv != "" && n.TokenFile != "" {
		errs = append(errs, fielderr.Invalid("token_env", "set either `token_env` or `token_file`, not both"))
	}
	if (n.TokenEnv != "" || n.TokenFile != "") && n.CredentialsFile != "" {
		errs = append(errs, fielderr.Invalid("credentials_file", "set either a credentials file or a token, not both"))
	}
	if n.PasswordEnv != "" && n.PasswordFile != "" {
		errs = append(errs, fielderr.Invalid("password_env", "set either `password_env` or `password_file`, not both"))
	}
	if n.User == "" {
		for _, kv := range [][2]string{{"password_env", n.PasswordEnv}, {"password_file", n.PasswordFile}} {
			if kv[1] != "" {
				errs = append(errs, fielderr.Invalid(kv[0], "needs `user`"))
			}
		}
	}
	if n.User != "" && (n.CredentialsFile != "" || n.TokenEnv != "" || n.TokenFile != "") {
		errs = append(errs, fielderr.Invalid("user", "set either a user and password, a credentials file or a token, not several"))
	}
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		errs = append(errs, fielderr.Invalid("tls", "`cert_file` and `key_file` must be set together"))
	}
	if n.ReconnectWait <= 0 {
		errs = append(errs, fielderr.Invalid("reconnect_wait", "must be positive"))
	}
	if n.ReconnectMaxWait < n.ReconnectWait {
		errs = append(errs, fielderr.Invalid("reconnect_max_wait", "must be at least `reconnect_wait` (%s)", n.ReconnectWait))
	}
	if n.ConnectTimeout <= 0 {
		errs = append(errs, fielderr.Invalid("connect_timeout", "must be positive"))
	}
	if n.Replicas < 1 || n.Replicas > 5 {
		errs = append(errs, fielderr.Invalid("replicas", "must be between 1 and 5, got %d", n.Replicas))
	}
	if n.MaxPayload < 1024 || n.MaxPayload > maxPayload {
		errs = append(errs, fielderr.Invalid("max_payload", "must be between 1024 and %d bytes, got %d", maxPayload, n.MaxPayload))
	}
	errs = append(errs, n.Subjects.validate()...)
	errs = append(errs, n.Consume.validate()...)
	return errors.Join(errs...)
}

func (u EmbeddedUsers) validate() []error {
	var errs []error
	for _, r := range []struct {
		key  string
		user User
	}{{"embedded.users.ragwatch", u.Ragwatch}, {"embedded.users.app", u.App}} {
		if !ValidName(r.user.Name) {
			errs = append(errs, fielderr.Invalid(r.key+".name", "must be letters, digits, '-' or '_', got %q", r.user.Name))
		}
		if r.user.PasswordEnv != "" && r.user.PasswordFile != "" {
			errs = append(errs, fielderr.Invalid(r.key+".password_env", "set either `password_env` or `password_file`, not both"))
		}
	}
	if u.Ragwatch.Name != "" && u.Ragwatch.Name == u.App.Name {
		errs = append(errs, fielderr.Invalid("embedded.users.app.name", "must differ from `embedded.users.ragwatch.name`"))
	}
	return errs
}

func (s Subjects) validate() []error {
	var errs []error
	seen := map[string]string{}
	var order []string // seen's subjects in the order of the keys
	for _, kv := range [][2]string{{"records", s.Records}, {"otlp", s.OTLP}, {"otlp_logs", s.OTLPLogs}, {"feedback", s.Feedback}, {"labels", s.Labels}} {
		key, subj := kv[0], kv[1]
		if subj == "" {
			continue
		}
		if err := CheckSubject(subj); err != nil {
			errs = append(errs, fielderr.Invalid("subjects."+key, "%v", err))
			continue
		}
		if other, dup := seen[subj]; dup {
			errs = append(errs, fielderr.Invalid("subjects."+key, "must differ from `subjects.%s`", other))
		} else {
			for _, prev := range order {
				if server.SubjectsCollide(subj, prev) {
					errs = append(errs, fielderr.Invalid("subjects."+key, "%q overlaps `subjects.%s` (%q): a message on both would be read twice, as two kinds", subj, seen[prev], prev))
				}
			}
		}
		seen[subj] = key
		order = append(order, subj)
	}
	return errs
}

func (c Consume) validate() []error {
	var errs []error
	switch c.Mode {
	case ModeCore:
		if c.QueueGroup != "" && !validToken(c.QueueGroup) {
			errs = append(errs, fielderr.Invalid("consume.queue_group", "must be letters, digits, '-', '_' or '.', got %q", c.QueueGroup))
		}
	case ModeJetStream:
		if !ValidName(c.Stream) {
			errs = append(errs, fielderr.Invalid("consume.stream", "must be a stream name of letters, digits, '-' or '_', got %q", c.Stream))
		}
		if !ValidName(c.Durable) {
			errs = append(errs, fielderr.Invalid("consume.durable", "must be a consumer name of letters, digits, '-' or '_', got %q", c.Durable))
		}
		if c.AckWait < 100*time.Millisecond {
			errs = append(errs, fielderr.Invalid("consume.ack_wait", "must be at least 100ms"))
		}
		if c.MaxDeliver == 0 || c.MaxDeliver < -1 {
			errs = append(errs, fielderr.Invalid("consume.max_deliver", "must be positive or -1 (unlimited)"))
		}
		if c.MaxAckPending <= 0 {
			errs = append(errs, fielderr.Invalid("consume.max_ack_pending", "must be positive"))
		}
		if c.StreamMaxAge < 0 {
			errs = append(errs, fielderr.Invalid("consume.stream_max_age", "must not be negative (0 keeps messages until acked)"))
		}
		if c.StreamMaxBytes <= 0 {
			errs = append(errs, fielderr.Invalid("consume.stream_max_bytes", "must be positive"))
		}
		if c.DedupMaxBytes <= 0 {
			errs = append(errs, fielderr.Invalid("consume.dedup_max_bytes", "must be positive"))
		}
		if !ValidName(c.DedupBucket) {
			errs = append(errs, fielderr.Invalid("consume.dedup_bucket", "must be a bucket name of letters, digits, '-' or '_', got %q", c.DedupBucket))
		}
	default:
		errs = append(errs, fielderr.Invalid("consume.mode", "must be core or jetstream, got %q", c.Mode))
	}
	if c.DedupWindow <= 0 {
		errs = append(errs, fielderr.Invalid("consume.dedup_window", "must be positive"))
	}
	if c.DedupMax <= 0 {
		errs = append(errs, fielderr.Invalid("consume.dedup_max", "must be positive"))
	}
	return errs
}

func checkEmbeddedEndpoint(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", s)
	}
	_ = host
	p, err := strconv.Atoi(port)
	if err != nil || p < -1 || p > 65535 {
		return fmt.Errorf("must be host:port with a port between 0 and 65535 (-1 or 0 picks a free one), got %q", s)
	}
	return nil
}

func checkNATSURL(s string) error {
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("must be a comma-separated list of nats://host:port, got %q", secret.URL(s).String())
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Errorf("scheme must be nats, tls, ws or wss, got %q", u.Scheme)
	}
	return nil
}

// CheckSubject accepts a NATS subject, with wildcards: tokens separated by '.', none empty,
// '>' only last.
func CheckSubject(s string) error {
	if strings.ContainsAny(s, " \t\r\n") {
		return fmt.Errorf("must be a NATS subject without white space, got %q", s)
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		if t == "" {
			return fmt.Errorf("must be a NATS subject with no empty token, got %q", s)
		}
		if t == ">" && i != len(toks)-1 {
			return fmt.Errorf("'>' must be the last token, got %q", s)
		}
		if len(t) > 1 && strings.ContainsAny(t, "*>") {
			return fmt.Errorf("wildcards must be whole tokens, got %q", s)
		}
	}
	return nil
}

// ValidName reports whether s can name a NATS stream, consumer, KV bucket or user: 1 to 200
// letters, digits, '-' or '_'.
func ValidName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, c := range s {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// validToken reports whether s is ValidName tokens joined by '.' (a queue group).
func validToken(s string) bool {
	for _, t := range strings.Split(s, ".") {
		if !ValidName(t) {
			return false
		}
	}
	return true
}
