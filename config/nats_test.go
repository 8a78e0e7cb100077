package config

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestNATSDefaults(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.NATS.IsEmbedded() {
		t.Fatal("default must be embedded")
	}
	want := defaultNATS()
	if !reflect.DeepEqual(c.NATS, want) {
		t.Fatalf("NATS = %+v, want %+v", c.NATS, want)
	}
	if c.NATS.StoreDir != "./ragwatch-data" || c.NATS.Embedded.Endpoint != "127.0.0.1:4222" {
		t.Fatalf("fixed defaults changed: %q %q", c.NATS.StoreDir, c.NATS.Embedded.Endpoint)
	}
	if c.NATS.Subjects != (NATSSubjects{Records: "ragwatch.records.>", OTLP: "ragwatch.otlp.traces", OTLPLogs: "ragwatch.otlp.logs", Feedback: "ragwatch.feedback.>", Labels: "ragwatch.labels.>"}) {
		t.Fatalf("subjects = %+v", c.NATS.Subjects)
	}
	if u := c.NATS.Embedded.Users; u.Ragwatch != (NATSUser{Name: "ragwatch"}) || u.App != (NATSUser{Name: "app"}) {
		t.Fatalf("embedded users = %+v", u)
	}
	if c.Feedback != (Feedback{Retention: 24 * time.Hour, MaxEntries: 200000, Bucket: "ragwatch_feedback", MaxBytes: 64 << 20}) {
		t.Fatalf("feedback = %+v", c.Feedback)
	}
}

func TestNATSExternalParse(t *testing.T) {
	c, err := Parse([]byte(`
nats:
  url: "nats://a:4222, tls://b:4222"
  token_env: NATS_TOKEN
  tls: { ca_file: /etc/ca.pem, cert_file: /etc/c.pem, key_file: /etc/k.pem }
  reconnect_wait: 250ms
  replicas: 3
  subjects: { otlp: "" }
  consume:
    mode: jetstream
    stream: RAG
    durable: side
    ack_wait: 5s
feedback:
  retention: 1h
`))
	if err != nil {
		t.Fatal(err)
	}
	n := c.NATS
	if n.IsEmbedded() {
		t.Fatal("url set: not embedded")
	}
	if got := n.Servers(); !reflect.DeepEqual(got, []string{"nats://a:4222", "tls://b:4222"}) {
		t.Fatalf("servers = %q", got)
	}
	if n.TokenEnv != "NATS_TOKEN" || n.TLS.CAFile != "/etc/ca.pem" || n.TLS.KeyFile != "/etc/k.pem" ||
		n.ReconnectWait != 250*time.Millisecond || n.Replicas != 3 || n.Subjects.OTLP != "" ||
		n.Subjects.Records != "ragwatch.records.>" || n.Consume.Mode != NATSModeJetStream ||
		n.Consume.Stream != "RAG" || n.Consume.Durable != "side" || n.Consume.AckWait != 5*time.Second ||
		c.Feedback.Retention != time.Hour {
		t.Fatalf("parsed = %+v feedback %+v", n, c.Feedback)
	}
}

func TestNATSValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"mode", "nats:\n  consume:\n    mode: pull\n", "line 3: `nats.consume.mode` must be core or jetstream, got \"pull\""},
		{"subject", "nats:\n  subjects:\n    records: \"a..b\"\n", "line 3: `nats.subjects.records` must be a NATS subject with no empty token, got \"a..b\""},
		{"wildcard", "nats:\n  subjects:\n    feedback: \"a.>.b\"\n", "line 3: `nats.subjects.feedback` '>' must be the last token, got \"a.>.b\""},
		{"same subject", "nats:\n  subjects:\n    records: x.y\n    feedback: x.y\n", "line 4: `nats.subjects.feedback` must differ from `subjects.records`"},
		{"endpoint", "nats:\n  embedded:\n    endpoint: localhost\n", "line 3: `nats.embedded.endpoint` must be host:port, got \"localhost\""},
		{"creds without url", "nats:\n  credentials_file: /x.creds\n", "line 2: `nats.credentials_file` applies only to an external cluster; set `url` or remove it"},
		{"bad url", "nats:\n  url: \"http://x:1\"\n", "line 2: `nats.url` scheme must be nats, tls, ws or wss, got \"http\""},
		{"token both", "nats:\n  url: nats://x:4222\n  token_env: A\n  token_file: /b\n", "line 3: `nats.token_env` set either `token_env` or `token_file`, not both"},
		{"password without user", "nats:\n  url: nats://x:4222\n  password_file: /p\n", "line 3: `nats.password_file` needs `user`"},
		{"user and token", "nats:\n  url: nats://x:4222\n  user: u\n  token_env: T\n", "line 3: `nats.user` set either a user and password, a credentials file or a token, not several"},
		{"user without url", "nats:\n  user: u\n", "line 2: `nats.user` applies only to an external cluster; set `url` or remove it"},
		{"embedded password both", "nats:\n  embedded:\n    users:\n      app:\n        password_env: A\n        password_file: /b\n", "line 5: `nats.embedded.users.app.password_env` set either `password_env` or `password_file`, not both"},
		{"embedded same user", "nats:\n  embedded:\n    users:\n      app:\n        name: ragwatch\n", "line 5: `nats.embedded.users.app.name` must differ from `embedded.users.ragwatch.name`"},
		{"embedded user name", "nats:\n  embedded:\n    users:\n      ragwatch:\n        name: \"a b\"\n", "line 5: `nats.embedded.users.ragwatch.name` must be letters, digits, '-' or '_', got \"a b\""},
		{"cert without key", "nats:\n  url: nats://x:4222\n  tls:\n    cert_file: /c\n", "line 3: `nats.tls` `cert_file` and `key_file` must be set together"},
		{"stream name", "nats:\n  consume:\n    mode: jetstream\n    stream: a.b\n", "line 4: `nats.consume.stream` must be a stream name of letters, digits, '-' or '_', got \"a.b\""},
		{"ack wait", "nats:\n  consume:\n    mode: jetstream\n    ack_wait: 1ms\n", "line 4: `nats.consume.ack_wait` must be at least 100ms"},
		{"payload", "nats:\n  max_payload: 10\n", "line 2: `nats.max_payload` must be between 1024 and 67108864 bytes, got 10"},
		{"retention", "feedback:\n  retention: 0s\n", "line 2: `feedback.retention` must be positive"},
		{"unknown", "nats:\n  consume:\n    queue: x\n", "line 3: `nats.consume.queue` is not a known key; expected one of: ack_wait, create_stream, dedup_bucket, dedup_max, dedup_max_bytes, dedup_window, durable, max_ack_pending, max_deliver, mode, queue_group, stream, stream_max_age, stream_max_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("want an error")
			}
			if err.Error() != tt.want {
				t.Fatalf("error:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

// A subject the app may publish on must not reach what ragwatch keeps to itself: its scoring
// queue, dead letters and scores, the app's inbox, or a subject NATS reserves. Each such
// subject, or a wildcard covering one, is an error naming the key, whether ragwatch runs the
// server or joins a cluster.
func TestNATSAppSubjectsOverlapRagwatch(t *testing.T) {
	const own = "ragwatch.scoring.records (`scoring.queue.subject`), ragwatch.scoring.dead (`scoring.queue.dead_letter_subject`), ragwatch.scores.> (`scoring.queue.scores_subject_prefix`)"
	const reserved = "$JS.> (the JetStream API and acknowledgements), $KV.> (the JetStream KV buckets), $O.> (the JetStream object stores), $SYS.> (the NATS system account), _INBOX.> (reply inboxes), _R_.> (service-import replies)"
	const inbox = "_INBOX_app.> (`nats.embedded.users.app.name`)"
	const advice = "; the app's user may publish on this subject, give it one of its own (such as %s)"
	only := func(key, subj string) string { // the other ingest subjects off, so only key's overlap is reported
		y := "nats:\n  subjects:\n"
		for _, k := range []string{"records", "otlp", "otlp_logs", "feedback", "labels"} {
			if k == key {
				y += "    " + k + ": \"" + subj + "\"\n"
			} else {
				y += "    " + k + ": \"\"\n"
			}
		}
		return y
	}
	line := func(key string) string {
		return map[string]string{"records": "3", "otlp": "4", "otlp_logs": "5", "feedback": "6", "labels": "7"}[key]
	}
	tests := []struct {
		key, subject, hits string
	}{
		{"records", "ragwatch.>", own},
		{"records", ">", own + ", " + inbox + ", " + reserved},
		{"feedback", "*.>", own + ", " + inbox + ", " + reserved},
		{"records", "ragwatch.scores.support-bot", "ragwatch.scores.> (`scoring.queue.scores_subject_prefix`)"},
		{"records", "ragwatch.scores.*", "ragwatch.scores.> (`scoring.queue.scores_subject_prefix`)"},
		{"otlp", "ragwatch.scoring.records", "ragwatch.scoring.records (`scoring.queue.subject`)"},
		{"labels", "ragwatch.scoring.dead", "ragwatch.scoring.dead (`scoring.queue.dead_letter_subject`)"},
		{"records", "ragwatch.scoring.*", "ragwatch.scoring.records (`scoring.queue.subject`), ragwatch.scoring.dead (`scoring.queue.dead_letter_subject`)"},
		{"labels", "$KV.ragwatch_alerts.x", "$KV.> (the JetStream KV buckets)"},
		{"feedback", "$JS.API.>", "$JS.> (the JetStream API and acknowledgements)"},
		{"otlp", "$SYS.x", "$SYS.> (the NATS system account)"},
		{"otlp", "$O.bucket.x", "$O.> (the JetStream object stores)"},
		{"otlp_logs", "ragwatch.scoring.records", "ragwatch.scoring.records (`scoring.queue.subject`)"},
		{"records", "$NRG.x", "$NRG.> (reserved by NATS)"},
		{"records", "_INBOX.>", "_INBOX.> (reply inboxes)"},
		{"records", "_INBOX_app.x", inbox},
		{"records", "_INBOX_other.x", "_INBOX_other.> (reserved by NATS)"},
		{"records", "_R_.x", "_R_.> (service-import replies)"},
	}
	defaults := map[string]string{"records": "ragwatch.records.>", "otlp": "ragwatch.otlp.traces", "otlp_logs": "ragwatch.otlp.logs", "feedback": "ragwatch.feedback.>", "labels": "ragwatch.labels.>"}
	for _, tt := range tests {
		want := "line " + line(tt.key) + ": `nats.subjects." + tt.key + "` \"" + tt.subject + "\" overlaps subjects the app must not publish on: " +
			tt.hits + fmt.Sprintf(advice, defaults[tt.key])
		t.Run(tt.key+" "+tt.subject, func(t *testing.T) {
			_, err := Parse([]byte(only(tt.key, tt.subject)))
			if err == nil || err.Error() != want {
				t.Fatalf("error:\n got %v\nwant %s", err, want)
			}
		})
	}

	// An external cluster: the same subjects are the app's, and ragwatch's inbox is not known.
	ext := "nats:\n  url: nats://10.0.0.1:4222\n  subjects:\n    records: \"ragwatch.>\"\n    otlp: \"\"\n    otlp_logs: \"\"\n    feedback: \"\"\n    labels: \"\"\n"
	want := "line 4: `nats.subjects.records` \"ragwatch.>\" overlaps subjects the app must not publish on: " + own + fmt.Sprintf(advice, "ragwatch.records.>")
	if _, err := Parse([]byte(ext)); err == nil || err.Error() != want {
		t.Fatalf("external cluster:\n got %v\nwant %s", err, want)
	}

	// Moving ragwatch's own subjects counts too: the app's subject is checked against them.
	moved := "nats:\n  subjects:\n    records: \"app.>\"\nscoring:\n  queue:\n    scores_subject_prefix: app.scores\n"
	want = "line 3: `nats.subjects.records` \"app.>\" overlaps subjects the app must not publish on: app.scores.> (`scoring.queue.scores_subject_prefix`)" + fmt.Sprintf(advice, "ragwatch.records.>")
	if _, err := Parse([]byte(moved)); err == nil || err.Error() != want {
		t.Fatalf("moved scores prefix:\n got %v\nwant %s", err, want)
	}

	// Subjects of their own pass, a single-token wildcard under ragwatch. included.
	for _, y := range []string{
		"",
		"nats:\n  subjects:\n    records: \"ragwatch.*\"\n",
		"nats:\n  subjects:\n    records: \"apps.records.>\"\n    feedback: \"apps.feedback.>\"\n",
	} {
		if _, err := Parse([]byte(y)); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}

// Two ingest subjects that overlap would read one message as two kinds.
func TestNATSIngestSubjectsOverlap(t *testing.T) {
	_, err := Parse([]byte("nats:\n  subjects:\n    records: \"apps.>\"\n    feedback: \"apps.feedback.>\"\n"))
	want := "line 4: `nats.subjects.feedback` \"apps.feedback.>\" overlaps `subjects.records` (\"apps.>\"): a message on both would be read twice, as two kinds"
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}
}

func TestNATSValidateReportsEveryProblem(t *testing.T) {
	_, err := Parse([]byte("nats:\n  replicas: 0\n  reconnect_wait: 0s\n"))
	want := "line 2: `nats.replicas` must be between 1 and 5, got 0\n" +
		"line 3: `nats.reconnect_wait` must be positive"
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}
}
