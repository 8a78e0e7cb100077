package notify

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/internal/fixture"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestUpdate(t *testing.T) {
	a, b := newServer(t, 200), newServer(t, 200)
	ca := notifierConfig(t, config.NotifierAlertmanager, a.URL)
	h := newHarness(t, ca)
	if err := h.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	send := func(want ...int32) {
		t.Helper()
		h.d.Send(context.Background(), []alerts.Alert{fixture.Alert()})
		testutil.CheckFor(t, 5*time.Second, time.Millisecond, "the requests", func() error {
			if na, nb := a.n.Load(), b.n.Load(); na != want[0] || nb != want[1] {
				return fmt.Errorf("requests a=%d b=%d, want %v", na, nb, want)
			}
			return nil
		})
	}
	send(1, 0)
	// Unchanged notifier: its repeat state survives (not re-sent within repeat_interval); a
	// new one starts at once.
	cb := notifierConfig(t, config.NotifierWebhook, b.URL)
	if err := h.d.Update([]config.Notifier{ca, cb}); err != nil {
		t.Fatal(err)
	}
	send(1, 1)
	// A changed notifier is a new worker with no memory of what was sent.
	ca.RepeatInterval = model.Duration(2 * time.Minute)
	if err := h.d.Update([]config.Notifier{ca, cb}); err != nil {
		t.Fatal(err)
	}
	send(2, 1)
	// One that cannot be built rejects the whole update.
	bad := config.Notifier{Name: "pd", Type: config.NotifierPagerDuty, URL: config.SecretURL(a.URL), RoutingKeyEnv: "RAGWATCH_TEST_UNSET_KEY",
		Timeout: time.Second, RatePerMinute: 60}
	if err := h.d.Update([]config.Notifier{bad}); err == nil || !strings.Contains(err.Error(), "RAGWATCH_TEST_UNSET_KEY") {
		t.Fatalf("bad update: %v", err)
	}
	h.mu.Lock()
	h.now = h.now.Add(3 * time.Minute) // past both repeat intervals
	h.mu.Unlock()
	send(3, 2)
	// A removed notifier gets nothing more.
	if err := h.d.Update([]config.Notifier{cb}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.now = h.now.Add(3 * time.Minute)
	h.mu.Unlock()
	send(3, 3)
	if err := h.d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Update([]config.Notifier{cb}); err == nil {
		t.Fatal("update after shutdown must fail")
	}
}
