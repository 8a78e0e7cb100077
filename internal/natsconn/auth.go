package natsconn

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/ragwatch/ragwatch/internal/secret"
)

// Credential is a user of the embedded server. File is where a generated password is kept
// ("" when the password came from the config). Inbox is the reply-subject prefix the user may
// subscribe to ("" for ragwatch, which may subscribe to anything).
type Credential struct {
	User     string
	Password secret.Secret
	File     string
	Inbox    string
}

// Option logs a client in as c, with c's inbox prefix when it has one.
func (c Credential) Option() nats.Option {
	return func(o *nats.Options) error {
		if err := nats.UserInfo(c.User, c.Password.Reveal())(o); err != nil {
			return err
		}
		if c.Inbox == "" {
			return nil
		}
		return nats.CustomInboxPrefix(c.Inbox)(o)
	}
}

// AppInbox is the reply-subject prefix of the app user: the one thing it may subscribe to, so
// that it can publish with a JetStream acknowledgement (nats.CustomInboxPrefix) without
// seeing the replies ragwatch itself receives on _INBOX.
func AppInbox(user string) string { return "_INBOX_" + user }

// Roles of the embedded users; a generated password is kept in <store_dir>/nats-<role>.password.
const (
	roleRagwatch = "ragwatch"
	roleApp      = "app"
)

// resolveUsers returns ragwatch's and the app's credentials: from password_env/password_file
// when set, else generated at first start into the store dir (mode 0600) and read back on
// later starts.
func resolveUsers(cfg Config, logger *slog.Logger) (own, app Credential, err error) {
	u := cfg.Embedded.Users
	if own, err = resolveUser(cfg.StoreDir, roleRagwatch, u.Ragwatch, logger); err != nil {
		return Credential{}, Credential{}, err
	}
	if app, err = resolveUser(cfg.StoreDir, roleApp, u.App, logger); err != nil {
		return Credential{}, Credential{}, err
	}
	app.Inbox = AppInbox(app.User)
	if own.User == app.User {
		return Credential{}, Credential{}, errors.New("`nats.embedded.users`: the ragwatch and app users must differ")
	}
	return own, app, nil
}

func resolveUser(storeDir, role string, u User, logger *slog.Logger) (Credential, error) {
	key := "nats.embedded.users." + role
	name := u.Name
	if name == "" {
		name = role
	}
	if u.PasswordEnv != "" || u.PasswordFile != "" {
		pw, err := secret.Read(u.PasswordEnv, u.PasswordFile)
		if err != nil {
			return Credential{}, fmt.Errorf("`%s` password: %w", key, err)
		}
		if pw == "" {
			return Credential{}, fmt.Errorf("`%s` password: empty", key)
		}
		return Credential{User: name, Password: pw}, nil
	}
	file := filepath.Join(storeDir, "nats-"+role+".password")
	pw, created, err := loadOrGenerate(file)
	if err != nil {
		return Credential{}, fmt.Errorf("`%s`: no password configured and %w", key, err)
	}
	if created {
		logger.Info("generated NATS password (set "+key+".password_file to choose one)", "user", name, "file", file)
	} else {
		logger.Info("NATS password read from file", "user", name, "file", file)
	}
	return Credential{User: name, Password: pw, File: file}, nil
}

// loadOrGenerate reads the password in file, or creates the file (mode 0600, exclusive) with
// a new random password. A file readable by others is narrowed to 0600.
func loadOrGenerate(file string) (pw secret.Secret, created bool, err error) {
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		if fi, serr := os.Stat(file); serr == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(file, 0o600); err != nil {
				return "", false, fmt.Errorf("password file %s is readable by others and cannot be narrowed to 0600: %w", file, err)
			}
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", false, fmt.Errorf("password file %s is empty; remove it to generate a new one", file)
		}
		return secret.Secret(s), false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("read password file %s: %w", file, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, fmt.Errorf("generate a password: %w", err)
	}
	s := base64.RawURLEncoding.EncodeToString(raw)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("create password file %s: %w", file, err)
	}
	_, werr := f.WriteString(s + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(file)
		return "", false, fmt.Errorf("write password file %s: %w", file, err)
	}
	return secret.Secret(s), true, nil
}

// AppAccount is the embedded server's account of the app user. ragwatch's own user, its
// JetStream streams and KV buckets stay in the global account ($G), where earlier versions
// stored them, so an upgrade finds its scoring queue, dead letters and alert state in place.
const AppAccount = "APP"

// responseThreshold is how long the embedded server keeps the way back for the reply of one
// app message (a service import's response map, ~350 bytes) before it forgets it. Nothing
// bounds how many are pending but this time: an app that floods reply-bearing messages holds
// up to its rate × twice the threshold of them (the server sweeps once per threshold).
//
//   - jetstream: the stream answers each message with its acknowledgement as it stores it,
//     which frees the way back at once (a flood waits in the stream's ingest queue, at most
//     100,000 messages: 96,000 pending at the peak of 93,000 messages/s, attack_test.go); 5s
//     is the nats.go publish timeout, after which the app no longer waits anyway.
//   - core: nothing of ragwatch's answers, so the way back only costs memory; 250ms leaves
//     room for a stream an operator keeps on the subjects, and held a flood of 128,000
//     messages/s to 76,000 pending (~26 MB); at 5s a sustained one would hold ~1.2 million
//     (~400 MB).
func responseThreshold(mode string) time.Duration {
	if mode == ModeJetStream {
		return 5 * time.Second
	}
	return 250 * time.Millisecond
}

// serverAccounts puts the app in an account of its own, AppAccount, that reaches ragwatch's
// account only through the ingest subjects, imported as services.
//
// Why accounts, and why services: a publisher chooses the reply subject of its message, and
// publish permissions do not apply to it. When a JetStream stream captures the message it
// answers with a publish acknowledgement on that reply subject, published by the server in
// the stream's account; with the app in ragwatch's account, a record with reply
// $KV.ragwatch_alerts.<key> overwrote alert state, ragwatch.scoring.records queued junk for
// the scorers. A stream import does not help: the message crosses with its reply unchanged
// and the acknowledgement still lands in ragwatch's account. A service import rewrites the
// reply to a one-time _R_.<id> subject of ragwatch's account that routes the answer back into
// the app's account and nowhere else: whatever reply the app writes, the acknowledgement is
// delivered on that subject in the app's account, where no stream, bucket or ragwatch
// subscriber lives, and the app's own inbox still gets its acknowledgement (responseThreshold
// says how long the server waits for it). The two replies that service imports pass through
// unchanged ($JS.ACK.>, _R_.>) are refused by the server when a client publishes with them.
//
// ragwatch's own user goes to the global account: serverUsers leaves its Account nil.
func serverAccounts(subjects Subjects, mode string) (own, app *server.Account, err error) {
	own, app = server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT), server.NewAccount(AppAccount)
	for _, s := range appSubjects(subjects) {
		if err := own.AddServiceExport(s, []*server.Account{app}); err != nil {
			return nil, nil, fmt.Errorf("embedded NATS: export %s to the app account: %w", s, err)
		}
		if err := own.SetServiceExportResponseThreshold(s, responseThreshold(mode)); err != nil {
			return nil, nil, fmt.Errorf("embedded NATS: export %s to the app account: %w", s, err)
		}
		if err := app.AddServiceImport(own, s, s); err != nil {
			return nil, nil, fmt.Errorf("embedded NATS: import %s into the app account: %w", s, err)
		}
	}
	return own, app, nil
}

// appSubjects are the enabled ingest subjects, the ones the app may publish on.
func appSubjects(subjects Subjects) []string {
	var out []string
	for _, s := range []string{subjects.Records, subjects.Feedback, subjects.OTLP, subjects.OTLPLogs, subjects.Labels} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// serverUsers gives ragwatch every permission in the global account and the app, in
// appAcc, publish on the enabled ingest subjects only, and subscribe on its own inbox (for
// JetStream publish acknowledgements). The publish deny list repeats what the allow list
// already excludes, so that even a subject that config validation would refuse cannot reach
// the JetStream API, KV buckets or ragwatch's replies.
//
// The server holds bcrypt hashes, not the passwords: nothing in its options (or a dump of them)
// gives a password away, and nats-server does not warn about plaintext passwords at start. The
// minimum cost is enough: the hashes never leave the process, which holds its own password in
// the clear for its client anyway, and every connect and start pays the cost.
func serverUsers(subjects Subjects, own, app Credential, appAcc *server.Account) ([]*server.User, error) {
	allow := appSubjects(subjects)
	deny := []string{"$JS.>", "$KV.>", "$O.>", "$SYS.>", "_INBOX.>"}
	if len(allow) == 0 {
		deny = []string{">"} // every ingest subject disabled: an empty allow list would allow all
	}
	ownHash, err := bcrypt.GenerateFromPassword([]byte(own.Password.Reveal()), bcrypt.MinCost)
	if err != nil {
		return nil, fmt.Errorf("hash the NATS password of user %s: %w", own.User, err)
	}
	appHash, err := bcrypt.GenerateFromPassword([]byte(app.Password.Reveal()), bcrypt.MinCost)
	if err != nil {
		return nil, fmt.Errorf("hash the NATS password of user %s: %w", app.User, err)
	}
	return []*server.User{
		{Username: own.User, Password: string(ownHash)},
		{Username: app.User, Password: string(appHash), Account: appAcc, Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{
				Allow: allow,
				Deny:  deny,
			},
			Subscribe: &server.SubjectPermission{Allow: []string{app.Inbox + ".>"}},
		}},
	}, nil
}
