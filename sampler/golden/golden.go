package golden

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/agreement"
	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/score"
)

// Reasons a run happens (the `reason` label of ragwatch_golden_runs_total).
const (
	ReasonFirst    = "first"         // no previous run is stored
	ReasonSchedule = "schedule"      // the interval passed
	ReasonChanged  = "judge_changed" // a judge's definition or model differs from the last run's
	ReasonManual   = "manual"
)

// Outcomes of a run (the `outcome` label of ragwatch_golden_runs_total).
const (
	OutcomeOK     = "ok"
	OutcomeDrift  = "drift"
	OutcomeBudget = "budget" // the scoring budget ran out: the run is not compared nor kept
	OutcomeError  = "error"  // every judge call failed, or the state could not be read
)

// Budget is the scoring budget the canary's judge calls are counted in (decide.Budget).
type Budget interface {
	Allow(feedback bool) bool
	Charge(model string, inputTokens, outputTokens int64, reportedUSD float64) float64
}

// Settings configures a Canary.
type Settings struct {
	Items   []Item
	Scorers []score.Scorer
	// Versions returns the judges' current fingerprints by metric (definition version and
	// model); a change from the last run's starts a run. nil: only the schedule starts runs.
	Versions func() map[string]string
	// Interval is the time between scheduled runs; CheckInterval how often the versions and
	// the schedule are checked.
	Interval, CheckInterval time.Duration
	// Tolerance: an item whose value moved more than this from the previous run changed.
	// MaxChanged: the share of a series' items that may change. MaxAgreementDrop: the largest
	// fall of agreement from the previous run. MinAgreement: a floor (0: none).
	Tolerance, MaxChanged, MaxAgreementDrop, MinAgreement float64
	Store                                                 Store
	Budget                                                Budget // nil: not counted
	// Sink receives each finished run's report (the service turns drift into alerts).
	Sink       func(context.Context, Report)
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
}

// Report is one run of the golden set.
type Report struct {
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Outcome string    `json:"outcome"`
	CostUSD float64   `json:"cost_usd"`
	Series  []Series  `json:"series"` // sorted by judge, then metric
}

// Series is one judge's metric over the golden set.
type Series struct {
	Judge  string `json:"judge"`
	Metric string `json:"metric"`
	N      int    `json:"n"` // items judged with a human value
	// Agreement is 1 − the mean absolute error against the human judgements, with its 95%
	// interval (internal/agreement); defined from two items.
	Agreement       float64  `json:"agreement"`
	Lower           float64  `json:"agreement_lower"`
	Upper           float64  `json:"agreement_upper"`
	Defined         bool     `json:"defined"`
	Previous        *float64 `json:"previous_agreement,omitempty"`
	Version         string   `json:"version,omitempty"`
	PreviousVersion string   `json:"previous_version,omitempty"`
	// Compared counts the items judged in this run and the previous one; Changed lists those
	// whose value moved by more than the tolerance, by item id.
	Compared int      `json:"compared"`
	Changed  []Change `json:"changed,omitempty"`
	Drift    bool     `json:"drift"`
	Reasons  []string `json:"reasons,omitempty"`
}

// Change is one item whose judge value moved.
type Change struct {
	Item     string  `json:"item"`
	Previous float64 `json:"previous"`
	Current  float64 `json:"current"`
	Human    float64 `json:"human"`
}

// Key is the series' key in State: "judge/metric".
func (s Series) Key() string { return s.Judge + "/" + s.Metric }

// Canary runs the golden set. Start runs it in the background; Run runs it once.
type Canary struct {
	s       Settings
	metrics *metrics

	runMu sync.Mutex // one run at a time
	mu    sync.Mutex // guards last
	last  *State

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New checks the settings and registers the metrics.
func New(s Settings) (*Canary, error) {
	if len(s.Items) == 0 {
		return nil, errors.New("golden: no items")
	}
	if len(s.Scorers) == 0 {
		return nil, errors.New("golden: no scorers run in this process (scoring.workers is 0?)")
	}
	if s.Store == nil {
		s.Store = &MemoryStore{}
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Interval <= 0 {
		s.Interval = 24 * time.Hour
	}
	if s.CheckInterval <= 0 {
		s.CheckInterval = time.Minute
	}
	return &Canary{s: s, metrics: newMetrics(s.Registerer)}, nil
}

// Start loads the previous run and checks, every CheckInterval, whether a run is due.
func (c *Canary) Start(ctx context.Context) error {
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(c.s.CheckInterval)
		defer t.Stop()
		for {
			if reason := c.due(ctx); reason != "" {
				if _, err := c.Run(ctx, reason); err != nil && ctx.Err() == nil {
					c.s.Logger.Warn("golden set run failed", "reason", reason, "err", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Shutdown stops the schedule and waits for a run in progress, which its context cancels.
func (c *Canary) Shutdown(ctx context.Context) error {
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// due says why a run should start now, or "".
func (c *Canary) due(ctx context.Context) string {
	last, err := c.previous(ctx)
	if err != nil {
		c.s.Logger.Warn("golden set: cannot read the previous run", "err", err)
		c.metrics.runs.WithLabelValues(ReasonSchedule, OutcomeError).Inc()
		return ""
	}
	switch {
	case last == nil:
		return ReasonFirst
	case c.versionsChanged(last):
		return ReasonChanged
	case c.s.Now().Sub(last.Time) >= c.s.Interval:
		return ReasonSchedule
	}
	return ""
}

func (c *Canary) versionsChanged(last *State) bool {
	if c.s.Versions == nil {
		return false
	}
	for m, v := range c.s.Versions() {
		if old, ok := last.Versions[m]; ok && old != v {
			return true
		}
	}
	return false
}

// previous is the last run's state: the store's, read at every check so that replicas sharing
// the bucket see one another's runs and judge the set about once per interval between them;
// this process's own last run when the store cannot be read.
func (c *Canary) previous(ctx context.Context) (*State, error) {
	last, err := c.s.Store.Load(ctx)
	if err == nil && last != nil {
		c.mu.Lock()
		c.last = last
		c.mu.Unlock()
		return last, nil
	}
	c.mu.Lock()
	cached := c.last
	c.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	return nil, err
}

// Run judges every item with every scorer, compares with the people and the previous run,
// exports the agreement, keeps the answers and hands the report to the sink. A run the budget
// cut short is reported (outcome "budget") but neither compared nor kept.
func (c *Canary) Run(ctx context.Context, reason string) (Report, error) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	rep := Report{Time: c.s.Now(), Reason: reason}
	prev, err := c.previous(ctx)
	if err != nil {
		rep.Outcome = OutcomeError
		c.metrics.runs.WithLabelValues(reason, rep.Outcome).Inc()
		return rep, err
	}
	type key struct{ judge, metric string }
	answers := map[key]map[string]float64{}
	versions := map[string]string{}
	judged := map[string]bool{} // metrics with an answer
	calls, failed := 0, 0
	complete := true
items:
	for _, it := range c.s.Items {
		for _, sc := range c.s.Scorers {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			if c.s.Budget != nil && !c.s.Budget.Allow(false) {
				complete = false
				break items
			}
			calls++
			res, err := sc.Score(ctx, it.Record)
			for _, r := range res {
				usd := r.CostUSD
				if c.s.Budget != nil {
					usd = c.s.Budget.Charge(r.Model, r.InputTokens, r.OutputTokens, r.CostUSD)
				}
				rep.CostUSD += usd
				if _, judged := it.Human[r.Metric]; !judged || !score.KnownMetric(r.Metric) {
					continue // only metrics the people judged, and only known names as labels
				}
				k := key{sc.Name(), r.Metric}
				if answers[k] == nil {
					answers[k] = map[string]float64{}
				}
				answers[k][it.ID] = r.Value
				judged[r.Metric] = true
				if fp := fingerprint(r); fp != "" {
					versions[r.Metric] = fp
				}
			}
			if err != nil && len(res) == 0 {
				failed++
			}
		}
	}
	c.metrics.cost.Add(rep.CostUSD)
	if !complete {
		rep.Outcome = OutcomeBudget
		c.metrics.runs.WithLabelValues(reason, rep.Outcome).Inc()
		c.s.Logger.Warn("golden set run stopped: the scoring budget is spent", "reason", reason)
		return rep, nil
	}
	if calls > 0 && failed == calls {
		rep.Outcome = OutcomeError
		c.metrics.runs.WithLabelValues(reason, rep.Outcome).Inc()
		return rep, errors.New("golden: every judge call failed")
	}
	if c.s.Versions != nil {
		for m, v := range c.s.Versions() {
			if judged[m] {
				versions[m] = v
			}
		}
	}
	next := &State{Time: rep.Time, Versions: versions, Answers: map[string]map[string]float64{}, Agreement: map[string]float64{}}
	byID := make(map[string]Item, len(c.s.Items))
	for _, it := range c.s.Items {
		byID[it.ID] = it
	}
	for k, vals := range answers {
		s := Series{Judge: k.judge, Metric: k.metric, N: len(vals), Version: versions[k.metric]}
		pairs := make([]agreement.Pair, 0, len(vals))
		for id, v := range vals {
			pairs = append(pairs, agreement.Pair{Human: byID[id].Human[k.metric], Judge: v})
		}
		if est := agreement.MeanAbsError(pairs); est.OK {
			s.Defined = true
			s.Agreement, s.Lower, s.Upper = 1-est.Value, math.Max(0, 1-est.Upper), 1-est.Lower
			next.Agreement[s.Key()] = s.Agreement
		}
		next.Answers[s.Key()] = vals
		if prev != nil {
			c.compare(&s, prev, vals, byID)
		}
		if s.Defined && c.s.MinAgreement > 0 && s.Agreement < c.s.MinAgreement {
			s.Drift = true
			s.Reasons = append(s.Reasons, fmt.Sprintf("agreement %.3f (95%% CI [%.3f, %.3f]) is below the floor %.3f", s.Agreement, s.Lower, s.Upper, c.s.MinAgreement))
		}
		rep.Series = append(rep.Series, s)
	}
	sort.Slice(rep.Series, func(i, j int) bool { return rep.Series[i].Key() < rep.Series[j].Key() })
	rep.Outcome = OutcomeOK
	for _, s := range rep.Series {
		if s.Drift {
			rep.Outcome = OutcomeDrift
		}
	}
	c.metrics.record(rep)
	c.mu.Lock()
	c.last = next
	c.mu.Unlock()
	if err := c.s.Store.Save(ctx, next); err != nil {
		c.s.Logger.Warn("golden set: cannot keep this run's answers", "err", err)
	}
	if c.s.Sink != nil {
		c.s.Sink(ctx, rep)
	}
	return rep, nil
}

// compare sets the series' changes and drift against the previous run.
func (c *Canary) compare(s *Series, prev *State, vals map[string]float64, byID map[string]Item) {
	s.PreviousVersion = prev.Versions[s.Metric]
	if a, ok := prev.Agreement[s.Key()]; ok {
		s.Previous = &a
		if s.Defined && a-s.Agreement > c.s.MaxAgreementDrop+1e-12 {
			s.Drift = true
			s.Reasons = append(s.Reasons, fmt.Sprintf("agreement fell from %.3f to %.3f (95%% CI [%.3f, %.3f]), more than %.3f",
				a, s.Agreement, s.Lower, s.Upper, c.s.MaxAgreementDrop))
		}
	}
	old := prev.Answers[s.Key()]
	for _, id := range slices.Sorted(maps.Keys(vals)) {
		p, ok := old[id]
		if !ok {
			continue
		}
		s.Compared++
		if math.Abs(vals[id]-p) > c.s.Tolerance+1e-12 {
			s.Changed = append(s.Changed, Change{Item: id, Previous: p, Current: vals[id], Human: byID[id].Human[s.Metric]})
		}
	}
	if s.Compared > 0 && float64(len(s.Changed)) > c.s.MaxChanged*float64(s.Compared)+1e-12 {
		s.Drift = true
		s.Reasons = append(s.Reasons, fmt.Sprintf("%d of %d items moved by more than %.3f since the previous run: %s",
			len(s.Changed), s.Compared, c.s.Tolerance, ChangedItems(s.Changed, 10)))
	}
	if s.PreviousVersion != "" && s.Version != "" && s.PreviousVersion != s.Version {
		s.Reasons = append(s.Reasons, fmt.Sprintf("the judge changed (%s → %s)", s.PreviousVersion, s.Version))
	}
}

// ChangedItems names up to max changed items ("a 0.20→0.90, b 1.00→0.40, … and 3 more").
func ChangedItems(cs []Change, max int) string {
	var b strings.Builder
	for i, ch := range cs {
		if i == max {
			fmt.Fprintf(&b, ", … and %d more", len(cs)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f→%.2f", ch.Item, ch.Previous, ch.Current)
	}
	return b.String()
}

// fingerprint is a result's judge identity: its definition version and model.
func fingerprint(r score.Result) string {
	switch {
	case r.JudgeVersion != "" && r.Model != "":
		return r.JudgeVersion + "@" + r.Model
	case r.Model != "":
		return r.Model
	}
	return r.JudgeVersion
}

type metrics struct {
	agreement, changed, drift *prometheus.GaugeVec
	runs                      *prometheus.CounterVec
	cost                      prometheus.Counter
	last                      prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		agreement: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ragwatch_golden_agreement",
			Help: "Agreement of a judge with the human judgements of the golden set at its last run: 1 − mean absolute error."}, []string{"judge", "metric"}),
		changed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ragwatch_golden_items_changed",
			Help: "Golden items whose judge value moved by more than golden.tolerance between the last two runs."}, []string{"judge", "metric"}),
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ragwatch_golden_drift",
			Help: "1 when the last golden run found the judge drifted (agreement fell or answers moved), else 0."}, []string{"judge", "metric"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ragwatch_golden_runs_total",
			Help: "Golden set runs by why they ran and how they ended."}, []string{"reason", "outcome"}),
		cost: prometheus.NewCounter(prometheus.CounterOpts{Name: "ragwatch_golden_cost_usd_total",
			Help: "What the golden set's judge calls cost in US dollars (also counted in the scoring budget)."}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ragwatch_golden_last_run_timestamp_seconds",
			Help: "When the last complete golden run finished, in Unix seconds."}),
	}
	if reg != nil {
		m.agreement = promreg.MustRegister(reg, m.agreement)
		m.changed = promreg.MustRegister(reg, m.changed)
		m.drift = promreg.MustRegister(reg, m.drift)
		m.runs = promreg.MustRegister(reg, m.runs)
		m.cost = promreg.MustRegister(reg, m.cost)
		m.last = promreg.MustRegister(reg, m.last)
	}
	return m
}

func (m *metrics) record(rep Report) {
	m.runs.WithLabelValues(rep.Reason, rep.Outcome).Inc()
	m.last.Set(float64(rep.Time.UnixNano()) / 1e9)
	for _, s := range rep.Series {
		if s.Defined {
			m.agreement.WithLabelValues(s.Judge, s.Metric).Set(s.Agreement)
		}
		m.changed.WithLabelValues(s.Judge, s.Metric).Set(float64(len(s.Changed)))
		d := 0.0
		if s.Drift {
			d = 1
		}
		m.drift.WithLabelValues(s.Judge, s.Metric).Set(d)
	}
}
