package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS configures the embedded server or the connection to an external cluster, the subjects
// ragwatch reads records, OTLP traces and feedback from, and how it consumes them.
type NATS struct {
	// URL lists the servers of an external cluster, comma-separated ("nats://a:4222,nats://b:4222").
	// "" starts the embedded server.
	URL      SecretURL    `yaml:"url"`       // may hold user:password
	StoreDir string       `yaml:"store_dir"` // embedded JetStream storage
	Embedded NATSEmbedded `yaml:"embedded"`

	// Name is the client connection name shown by `nats server report connections`.
	Name string `yaml:"name"`
	// CredentialsFile is a NATS .creds file (JWT + nkey seed); only with url.
	CredentialsFile string `yaml:"credentials_file"`
	// TokenEnv / TokenFile name where the auth token comes from (one of them); only with url.
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// User, with the password from PasswordEnv or PasswordFile, logs in to an external cluster
	// (instead of user info in `url`, which would put the password in the config); only with url.
	User         string  `yaml:"user"`
	PasswordEnv  string  `yaml:"password_env"`
	PasswordFile string  `yaml:"password_file"`
	TLS          NATSTLS `yaml:"tls"`

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

	Subjects NATSSubjects `yaml:"subjects"`
	Consume  NATSConsume  `yaml:"consume"`
}

// NATSEmbedded configures the embedded nats-server. It always requires credentials: an
// unauthenticated client is refused on connect, whatever address it listens on.
type NATSEmbedded struct {
	Endpoint string            `yaml:"endpoint"`
	Users    NATSEmbeddedUsers `yaml:"users"`
	// MaxStore is the embedded server's JetStream file storage limit in bytes. Every stream and
	// bucket ragwatch creates reserves its max_bytes against it (CheckStorage), so the store
	// dir never outgrows its volume: the default fits the Kubernetes example's 512 MiB emptyDir.
	MaxStore int64 `yaml:"max_store"`
}

// NATSEmbeddedUsers are the two users of the embedded server.
type NATSEmbeddedUsers struct {
	// Ragwatch is ragwatch's own connection: every permission (streams, KV buckets, scores).
	Ragwatch NATSUser `yaml:"ragwatch"`
	// App is the application next to ragwatch, in an account of its own: it may publish on
	// the ingest subjects (Subjects) and subscribe on its own inbox, nothing else (no
	// JetStream API, and no reply subject of its reaches ragwatch's account).
	App NATSUser `yaml:"app"`
}

// NATSUser is one user of the embedded server. The password comes from PasswordEnv or
// PasswordFile; with neither, ragwatch generates one at first start into
// <store_dir>/nats-<role>.password (mode 0600), reuses it afterwards and logs the path.
type NATSUser struct {
	Name         string `yaml:"name"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
}

// NATSTLS configures TLS to an external cluster.
type NATSTLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// NATSSubjects are the subjects ragwatch reads from; "" disables one.
type NATSSubjects struct {
	Records  string `yaml:"records"`  // JSON record or array of records
	OTLP     string `yaml:"otlp"`     // OTLP ExportTraceServiceRequest, protobuf
	Feedback string `yaml:"feedback"` // feedback JSON
	Labels   string `yaml:"labels"`   // human labels JSON
}

// NATSConsume chooses how ragwatch consumes its subjects.
type NATSConsume struct {
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
	NATSModeCore      = "core"
	NATSModeJetStream = "jetstream"
)

func defaultNATS() NATS {
	return NATS{
		StoreDir: "./ragwatch-data",
		Embedded: NATSEmbedded{Endpoint: "127.0.0.1:4222", MaxStore: 448 << 20, Users: NATSEmbeddedUsers{
			Ragwatch: NATSUser{Name: "ragwatch"},
			App:      NATSUser{Name: "app"},
		}},
		Name:             "ragwatch",
		ReconnectWait:    time.Second,
		ReconnectMaxWait: 30 * time.Second,
		ConnectTimeout:   10 * time.Second,
		Replicas:         1,
		MaxPayload:       8 << 20,
		Subjects: NATSSubjects{
			Records:  "ragwatch.records.>",
			OTLP:     "ragwatch.otlp.traces",
			Feedback: "ragwatch.feedback.>",
			Labels:   "ragwatch.labels.>",
		},
		Consume: NATSConsume{
			Mode:           NATSModeCore,
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
func (n NATS) IsEmbedded() bool { return strings.TrimSpace(n.URL.Reveal()) == "" }

// Servers returns the server URLs of an external cluster.
func (n NATS) Servers() []string {
	var out []string
	for _, s := range strings.Split(n.URL.Reveal(), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// maxNATSPayload is the largest payload nats-server accepts.
const maxNATSPayload = 64 << 20

// Validate implements Validator.
func (n NATS) Validate() error {
	var errs []error
	if n.IsEmbedded() {
		if strings.TrimSpace(n.StoreDir) == "" {
			errs = append(errs, Invalid("store_dir", "must not be empty when the embedded server is used (no `url`)"))
		}
		if err := checkEmbeddedEndpoint(n.Embedded.Endpoint); err != nil {
			errs = append(errs, Invalid("embedded.endpoint", "%v", err))
		}
		if n.Embedded.MaxStore <= 0 {
			errs = append(errs, Invalid("embedded.max_store", "must be positive (bytes of JetStream file storage)"))
		}
		errs = append(errs, n.Embedded.Users.validate()...)
		for _, kv := range [][2]string{
			{"credentials_file", n.CredentialsFile}, {"token_env", n.TokenEnv}, {"token_file", n.TokenFile},
			{"user", n.User}, {"password_env", n.PasswordEnv}, {"password_file", n.PasswordFile},
			{"tls.ca_file", n.TLS.CAFile}, {"tls.cert_file", n.TLS.CertFile}, {"tls.key_file", n.TLS.KeyFile},
		} {
			if key, v := kv[0], kv[1]; v != "" {
				errs = append(errs, Invalid(key, "applies only to an external cluster; set `url` or remove it"))
			}
		}
	} else {
		for _, s := range n.Servers() {
			if err := checkNATSURL(s); err != nil {
				errs = append(errs, Invalid("url", "%v", err))
			}
		}
		if len(n.Servers()) == 0 {
			errs = append(errs, Invalid("url", "must list at least one server"))
		}
	}
	if n.TokenEnv != "" && n.TokenFile != "" {
		errs = append(errs, Invalid("token_env", "set either `token_env` or `token_file`, not both"))
	}
	if (n.TokenEnv != "" || n.TokenFile != "") && n.CredentialsFile != "" {
		errs = append(errs, Invalid("credentials_file", "set either a credentials file or a token, not both"))
	}
	if n.PasswordEnv != "" && n.PasswordFile != "" {
		errs = append(errs, Invalid("password_env", "set either `password_env` or `password_file`, not both"))
	}
	if n.User == "" {
		for _, kv := range [][2]string{{"password_env", n.PasswordEnv}, {"password_file", n.PasswordFile}} {
			if kv[1] != "" {
				errs = append(errs, Invalid(kv[0], "needs `user`"))
			}
		}
	}
	if n.User != "" && (n.CredentialsFile != "" || n.TokenEnv != "" || n.TokenFile != "") {
		errs = append(errs, Invalid("user", "set either a user and password, a credentials file or a token, not several"))
	}
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		errs = append(errs, Invalid("tls", "`cert_file` and `key_file` must be set together"))
	}
	if n.ReconnectWait <= 0 {
		errs = append(errs, Invalid("reconnect_wait", "must be positive"))
	}
	if n.ReconnectMaxWait < n.ReconnectWait {
		errs = append(errs, Invalid("reconnect_max_wait", "must be at least `reconnect_wait` (%s)", n.ReconnectWait))
	}
	if n.ConnectTimeout <= 0 {
		errs = append(errs, Invalid("connect_timeout", "must be positive"))
	}
	if n.Replicas < 1 || n.Replicas > 5 {
		errs = append(errs, Invalid("replicas", "must be between 1 and 5, got %d", n.Replicas))
	}
	if n.MaxPayload < 1024 || n.MaxPayload > maxNATSPayload {
		errs = append(errs, Invalid("max_payload", "must be between 1024 and %d bytes, got %d", maxNATSPayload, n.MaxPayload))
	}
	errs = append(errs, n.Subjects.validate()...)
	errs = append(errs, n.Consume.validate()...)
	return joinErrs(errs)
}

func (u NATSEmbeddedUsers) validate() []error {
	var errs []error
	for _, r := range []struct {
		key  string
		user NATSUser
	}{{"embedded.users.ragwatch", u.Ragwatch}, {"embedded.users.app", u.App}} {
		if !validName(r.user.Name) {
			errs = append(errs, Invalid(r.key+".name", "must be letters, digits, '-' or '_', got %q", r.user.Name))
		}
		if r.user.PasswordEnv != "" && r.user.PasswordFile != "" {
			errs = append(errs, Invalid(r.key+".password_env", "set either `password_env` or `password_file`, not both"))
		}
	}
	if u.Ragwatch.Name != "" && u.Ragwatch.Name == u.App.Name {
		errs = append(errs, Invalid("embedded.users.app.name", "must differ from `embedded.users.ragwatch.name`"))
	}
	return errs
}

func (s NATSSubjects) validate() []error {
	var errs []error
	seen := map[string]string{}
	var order []string // seen's subjects in the order of the keys
	for _, kv := range [][2]string{{"records", s.Records}, {"otlp", s.OTLP}, {"feedback", s.Feedback}, {"labels", s.Labels}} {
		key, subj := kv[0], kv[1]
		if subj == "" {
			continue
		}
		if err := checkSubject(subj); err != nil {
			errs = append(errs, Invalid("subjects."+key, "%v", err))
			continue
		}
		if other, dup := seen[subj]; dup {
			errs = append(errs, Invalid("subjects."+key, "must differ from `subjects.%s`", other))
		} else {
			for _, prev := range order {
				if server.SubjectsCollide(subj, prev) {
					errs = append(errs, Invalid("subjects."+key, "%q overlaps `subjects.%s` (%q): a message on both would be read twice, as two kinds", subj, seen[prev], prev))
				}
			}
		}
		seen[subj] = key
		order = append(order, subj)
	}
	return errs
}

// natsReserved are subjects NATS keeps for itself. A reply or a subscription there reaches
// the JetStream API, the streams and buckets, or another client's replies.
var natsReserved = []struct{ subject, what string }{
	{"$JS.>", "the JetStream API and acknowledgements"},
	{"$KV.>", "the JetStream KV buckets"},
	{"$O.>", "the JetStream object stores"},
	{"$SYS.>", "the NATS system account"},
	{"_INBOX.>", "reply inboxes"},
	{"_R_.>", "service-import replies"},
}

// CheckNATSSubjects refuses ingest subjects (nats.subjects.*, the subjects the app user may
// publish on) that overlap a subject ragwatch keeps to itself: its scoring queue, dead
// letters and scores, the app's own inbox, or a subject NATS reserves ($JS, $KV, $O, $SYS,
// any other $ subject, _INBOX, _R_). A wildcard that covers one (">", "ragwatch.>", "*.>")
// counts. With such a subject the app could publish forged scores or records straight into
// the scoring queue, and read its own acknowledgements as records. Overlaps are tested with
// nats-server's own subject matcher.
func CheckNATSSubjects(c *Config) error {
	q := c.Scoring.Queue
	own := []struct{ key, subject string }{
		{"scoring.queue.subject", q.Subject},
		{"scoring.queue.dead_letter_subject", q.DeadLetterSubject},
		{"scoring.queue.scores_subject_prefix", q.ScoresSubjectPrefix + ".>"},
	}
	if c.NATS.IsEmbedded() && validName(c.NATS.Embedded.Users.App.Name) {
		own = append(own, struct{ key, subject string }{"nats.embedded.users.app.name", "_INBOX_" + c.NATS.Embedded.Users.App.Name + ".>"})
	}
	s := c.NATS.Subjects
	var errs []error
	for _, kv := range [][2]string{{"records", s.Records}, {"otlp", s.OTLP}, {"feedback", s.Feedback}, {"labels", s.Labels}} {
		key, subj := "nats.subjects."+kv[0], kv[1]
		if subj == "" || checkSubject(subj) != nil {
			continue // reported by NATSSubjects.validate
		}
		var hits []string
		for _, o := range own {
			if checkSubject(o.subject) == nil && server.SubjectsCollide(subj, o.subject) {
				hits = append(hits, fmt.Sprintf("%s (`%s`)", o.subject, o.key))
			}
		}
		for _, r := range natsReserved {
			if server.SubjectsCollide(subj, r.subject) {
				hits = append(hits, fmt.Sprintf("%s (%s)", r.subject, r.what))
			}
		}
		first, _, _ := strings.Cut(subj, ".")
		if len(hits) == 0 && (strings.HasPrefix(first, "$") || strings.HasPrefix(first, "_INBOX")) {
			hits = append(hits, fmt.Sprintf("%s.> (reserved by NATS)", first))
		}
		if len(hits) > 0 {
			errs = append(errs, Invalid(key, "%q overlaps subjects the app must not publish on: %s; the app's user may publish on this subject, give it one of its own (such as %s)",
				subj, strings.Join(hits, ", "), defaultSubject(kv[0])))
		}
	}
	return errors.Join(errs...)
}

func defaultSubject(key string) string {
	d := defaultNATS().Subjects
	switch key {
	case "records":
		return d.Records
	case "otlp":
		return d.OTLP
	case "feedback":
		return d.Feedback
	default:
		return d.Labels
	}
}

func (c NATSConsume) validate() []error {
	var errs []error
	switch c.Mode {
	case NATSModeCore:
		if c.QueueGroup != "" && !validToken(c.QueueGroup) {
			errs = append(errs, Invalid("consume.queue_group", "must be letters, digits, '-', '_' or '.', got %q", c.QueueGroup))
		}
	case NATSModeJetStream:
		if !validName(c.Stream) {
			errs = append(errs, Invalid("consume.stream", "must be a stream name of letters, digits, '-' or '_', got %q", c.Stream))
		}
		if !validName(c.Durable) {
			errs = append(errs, Invalid("consume.durable", "must be a consumer name of letters, digits, '-' or '_', got %q", c.Durable))
		}
		if c.AckWait < 100*time.Millisecond {
			errs = append(errs, Invalid("consume.ack_wait", "must be at least 100ms"))
		}
		if c.MaxDeliver == 0 || c.MaxDeliver < -1 {
			errs = append(errs, Invalid("consume.max_deliver", "must be positive or -1 (unlimited)"))
		}
		if c.MaxAckPending <= 0 {
			errs = append(errs, Invalid("consume.max_ack_pending", "must be positive"))
		}
		if c.StreamMaxAge < 0 {
			errs = append(errs, Invalid("consume.stream_max_age", "must not be negative (0 keeps messages until acked)"))
		}
		if c.StreamMaxBytes <= 0 {
			errs = append(errs, Invalid("consume.stream_max_bytes", "must be positive"))
		}
		if c.DedupMaxBytes <= 0 {
			errs = append(errs, Invalid("consume.dedup_max_bytes", "must be positive"))
		}
		if !validName(c.DedupBucket) {
			errs = append(errs, Invalid("consume.dedup_bucket", "must be a bucket name of letters, digits, '-' or '_', got %q", c.DedupBucket))
		}
	default:
		errs = append(errs, Invalid("consume.mode", "must be core or jetstream, got %q", c.Mode))
	}
	if c.DedupWindow <= 0 {
		errs = append(errs, Invalid("consume.dedup_window", "must be positive"))
	}
	if c.DedupMax <= 0 {
		errs = append(errs, Invalid("consume.dedup_max", "must be positive"))
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
		return fmt.Errorf("must be a comma-separated list of nats://host:port, got %q", SecretURL(s).String())
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Errorf("scheme must be nats, tls, ws or wss, got %q", u.Scheme)
	}
	return nil
}

// checkSubject accepts a NATS subject, with wildcards: tokens separated by '.', none empty,
// '>' only last.
func checkSubject(s string) error {
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

func validName(s string) bool {
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

func validToken(s string) bool {
	for _, t := range strings.Split(s, ".") {
		if !validName(t) {
			return false
		}
	}
	return true
}

// Feedback configures how late user feedback is joined to its record.
type Feedback struct {
	// Retention is how long feedback waits for its record, and how long a record's trace id is
	// remembered for feedback arriving later; then pending feedback is counted as orphaned.
	Retention time.Duration `yaml:"retention"`
	// MaxEntries bounds the traces and pending feedback held (ids, time, signals only).
	MaxEntries int `yaml:"max_entries"`
	// Bucket is the JetStream KV bucket that persists the join state ("" keeps it in memory).
	Bucket string `yaml:"bucket"`
	// PersistSeen also persists every record's ids in the bucket, for feedback that arrives
	// after a restart or at another sidecar sharing the bucket. It costs a KV write and a key
	// per record for `retention`; off by default, when only pending feedback is persisted.
	PersistSeen bool `yaml:"persist_seen"`
	// MaxBytes caps the bucket; when it is full new state is not persisted (counted as
	// storage_full) and the join keeps working from memory.
	MaxBytes int64 `yaml:"max_bytes"`
}

func defaultFeedback() Feedback {
	return Feedback{Retention: 24 * time.Hour, MaxEntries: 200000, Bucket: "ragwatch_feedback", MaxBytes: 64 << 20}
}

// Validate implements Validator.
func (f Feedback) Validate() error {
	var errs []error
	if f.Retention <= 0 {
		errs = append(errs, Invalid("retention", "must be positive"))
	}
	if f.MaxEntries <= 0 {
		errs = append(errs, Invalid("max_entries", "must be positive"))
	}
	if f.Bucket != "" && f.MaxBytes <= 0 {
		errs = append(errs, Invalid("max_bytes", "must be positive"))
	}
	if f.Bucket != "" && !validName(f.Bucket) {
		errs = append(errs, Invalid("bucket", "must be a bucket name of letters, digits, '-' or '_', got %q", f.Bucket))
	}
	return joinErrs(errs)
}
