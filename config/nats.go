package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ragwatch/ragwatch/internal/natsconn"
)

// The `nats:` section's types, defaults and checks live in internal/natsconn, with the
// connection that uses them (natsconn.Config); config embeds them under these names. What
// reads across sections (CheckNATSSubjects) stays here.
type (
	NATS              = natsconn.Config
	NATSEmbedded      = natsconn.Embedded
	NATSEmbeddedUsers = natsconn.EmbeddedUsers
	NATSUser          = natsconn.User
	NATSTLS           = natsconn.TLS
	NATSSubjects      = natsconn.Subjects
	NATSConsume       = natsconn.Consume
)

// Consume modes.
const (
	NATSModeCore      = natsconn.ModeCore
	NATSModeJetStream = natsconn.ModeJetStream
)

func defaultNATS() NATS { return natsconn.DefaultConfig() }

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
	if c.NATS.IsEmbedded() && natsconn.ValidName(c.NATS.Embedded.Users.App.Name) {
		own = append(own, struct{ key, subject string }{"nats.embedded.users.app.name", "_INBOX_" + c.NATS.Embedded.Users.App.Name + ".>"})
	}
	s := c.NATS.Subjects
	var errs []error
	for _, kv := range [][2]string{{"records", s.Records}, {"otlp", s.OTLP}, {"otlp_logs", s.OTLPLogs}, {"feedback", s.Feedback}, {"labels", s.Labels}} {
		key, subj := "nats.subjects."+kv[0], kv[1]
		if subj == "" || natsconn.CheckSubject(subj) != nil {
			continue // reported by natsconn.Subjects.validate
		}
		var hits []string
		for _, o := range own {
			if natsconn.CheckSubject(o.subject) == nil && server.SubjectsCollide(subj, o.subject) {
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
	case "otlp_logs":
		return d.OTLPLogs
	case "feedback":
		return d.Feedback
	default:
		return d.Labels
	}
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
	if f.Bucket != "" && !natsconn.ValidName(f.Bucket) {
		errs = append(errs, Invalid("bucket", "must be a bucket name of letters, digits, '-' or '_', got %q", f.Bucket))
	}
	return joinErrs(errs)
}
