package signals

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cactus/go-statsd-client/v5/statsd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
)

// statsd stat names, under the configured prefix (default "rag").
const (
	statRequests     = "requests"            // counter
	statRetrieved    = "retrieved_count"     // gauge
	statAvgRelevance = "avg_relevance"       // gauge (float)
	statAnswerLength = "answer_length"       // gauge: words of the answer
	statAnswerTokens = "answer_tokens"       // gauge: output tokens, when usage reports them
	statCitations    = "citations"           // gauge
	statEmpty        = "empty_retrievals"    // counter
	statNotSeen      = "retrievals_not_seen" // counter
	statUserFeedback = "user_feedback"       // gauge (float, -1..1)
	statFeedback     = "feedback"            // counter, tagged with sentiment
	statRefusals     = "refusals"            // counter
)

var statLatency = [numStages]string{"latency.retrieval", "latency.generation", "latency.total"} // timings (ms)

// ResolveInterval is how often a statsd endpoint given by host name is resolved again, so a
// moved statsd server (a rescheduled pod, a DNS change) keeps receiving.
const ResolveInterval = 30 * time.Second

// statsdRecorder formats all lines of one record into one chunk and hands it to the
// go-statsd-client buffered sender in one call (one lock instead of one per line, and a
// record's lines never straddle two packets). The sender's goroutine sends a packet when the
// buffer reaches flush_bytes or every flush_interval; a failed send is counted and dropped,
// never retried or waited on. The line format is the client's own (Client.submit): prefix.stat,
// infix tags, ':' value, type, suffix tags.
type statsdRecorder struct {
	sender statsd.Sender // the buffered sender
	prefix string        // "rag." (or "" for no prefix)
	format statsd.TagFormat
	errs   prometheus.Counter
	// flushBytes is the packet size; a record's chunk at least this long is queued per line.
	flushBytes int

	tags sync.Map  // seriesKey -> *statsdTags; bounded by cardinality.ServiceSet and cardinality.VariantSet
	bufs sync.Pool // *[]byte chunks; the buffered sender copies what it is given
}

// statsdTags holds one service's tag text, sanitised, in the configured format.
type statsdTags struct {
	infix     string                // before ':' (influx, graphite)
	suffix    string                // after the type (datadog)
	sentiment [numSentiments]string // same, with the sentiment tag added
	sentSuf   [numSentiments]string
}

// parseTagFormat maps the config's tag_format to the client's format; none is 0.
func parseTagFormat(s string) (statsd.TagFormat, error) {
	switch s {
	case "datadog", "":
		return statsd.SuffixOctothorpe, nil
	case "influx":
		return statsd.InfixComma, nil
	case "graphite":
		return statsd.InfixSemicolon, nil
	case "none":
		return 0, nil
	}
	return 0, fmt.Errorf("signals: statsd tag_format must be datadog, influx, graphite or none, got %q", s)
}

// countingSender counts the errors of the UDP sender underneath the buffer, which the buffered
// sender itself discards.
type countingSender struct {
	statsd.Sender
	errs prometheus.Counter
}

func (c countingSender) Send(data []byte) (int, error) {
	n, err := c.Sender.Send(data)
	if err != nil {
		c.errs.Inc()
	}
	return n, err
}

// udpSender sends to an IP address as is and re-resolves a host name every ResolveInterval.
func udpSender(addr string) (statsd.Sender, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil && net.ParseIP(host) == nil {
		return statsd.NewResolvingSimpleSender(addr, ResolveInterval)
	}
	return statsd.NewSimpleSender(addr)
}

// newStatsdRecorder starts a buffered sender; newSender (nil: a UDP sender) is for tests.
func newStatsdRecorder(c config.Statsd, errs prometheus.Counter, newSender func(addr string) (statsd.Sender, error)) (*statsdRecorder, error) {
	format, err := parseTagFormat(c.TagFormat)
	if err != nil {
		return nil, err
	}
	if newSender == nil {
		newSender = udpSender
	}
	udp, err := newSender(c.Endpoint)
	if err != nil {
		return nil, err
	}
	flushBytes := c.FlushBytes
	if flushBytes <= 0 {
		flushBytes = 1432
	}
	interval := c.FlushInterval
	if interval <= 0 { // config.Default sets 100ms; a hand-built config must not make the ticker panic
		interval = 100 * time.Millisecond
	}
	buffered, err := statsd.NewBufferedSenderWithSender(countingSender{udp, errs}, interval, flushBytes)
	if err != nil {
		_ = udp.Close()
		return nil, err
	}
	prefix := strings.TrimSuffix(c.Prefix, ".")
	if prefix != "" {
		prefix += "."
	}
	r := &statsdRecorder{sender: buffered, prefix: prefix, format: format, errs: errs, flushBytes: flushBytes}
	r.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	return r, nil
}

// sanitizeTag keeps a tag value from breaking the line: the separators of every tag format
// and of the statsd line itself become '_'.
func sanitizeTag(v string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ':', '|', ',', '#', '@', '=', ';', ' ', '\n', '\r', '\t':
			return '_'
		}
		return r
	}, v)
}

// forget drops the cached tags of an evicted service label; statsd keeps no series.
func (s *statsdRecorder) forget(service string) {
	deleteKeys(&s.tags, func(k seriesKey) bool { return k.service == service })
}

// forgetVariant drops the cached tags of an evicted variant label.
func (s *statsdRecorder) forgetVariant(variant string) {
	deleteKeys(&s.tags, func(k seriesKey) bool { return k.variant == variant })
}

func deleteKeys(m *sync.Map, match func(seriesKey) bool) {
	m.Range(func(k, _ any) bool {
		if match(k.(seriesKey)) {
			m.Delete(k)
		}
		return true
	})
}

func (s *statsdRecorder) tagsFor(service, variant string) *statsdTags {
	key := seriesKey{service, variant}
	if t, ok := s.tags.Load(key); ok {
		return t.(*statsdTags)
	}
	svc := sanitizeTag(service)
	vt := ""
	if variant != "" {
		vt = sanitizeTag(variant)
	}
	t := &statsdTags{}
	for i := range t.sentiment {
		sent := Sentiment(i).String()
		switch s.format {
		case statsd.SuffixOctothorpe:
			t.suffix = "|#service:" + svc
			if vt != "" {
				t.suffix += ",variant:" + vt
			}
			t.sentSuf[i] = t.suffix + ",sentiment:" + sent
		case statsd.InfixComma:
			t.infix = ",service=" + svc
			if vt != "" {
				t.infix += ",variant=" + vt
			}
			t.sentiment[i] = t.infix + ",sentiment=" + sent
		case statsd.InfixSemicolon:
			t.infix = ";service=" + svc
			if vt != "" {
				t.infix += ";variant=" + vt
			}
			t.sentiment[i] = t.infix + ";sentiment=" + sent
		}
	}
	actual, _ := s.tags.LoadOrStore(key, t)
	return actual.(*statsdTags)
}

// line appends one statsd line: prefix.stat[infix]:value|typ[suffix].
type lineWriter struct {
	b      []byte
	prefix string
}

func (w *lineWriter) start(stat, infix string) {
	if len(w.b) > 0 {
		w.b = append(w.b, '\n')
	}
	w.b = append(w.b, w.prefix...)
	w.b = append(w.b, stat...)
	w.b = append(w.b, infix...)
	w.b = append(w.b, ':')
}

func (w *lineWriter) int(stat, infix string, v int64, typ, suffix string) {
	w.start(stat, infix)
	w.b = strconv.AppendInt(w.b, v, 10)
	w.b = append(w.b, typ...)
	w.b = append(w.b, suffix...)
}

func (w *lineWriter) float(stat, infix string, v float64, typ, suffix string) {
	w.start(stat, infix)
	w.b = strconv.AppendFloat(w.b, v, 'f', -1, 64)
	w.b = append(w.b, typ...)
	w.b = append(w.b, suffix...)
}

// gauge writes a float gauge. A negative value is sent as "0" then the value: "-0.5" alone
// would be read as a decrement by etsy-style statsd servers; DogStatsD reads it as the value.
func (w *lineWriter) gauge(stat, infix string, v float64, suffix string) {
	if v < 0 {
		w.int(stat, infix, 0, "|g", suffix)
	}
	w.float(stat, infix, v, "|g", suffix)
}

// Record implements Recorder.
func (s *statsdRecorder) Record(_ context.Context, o Observation) {
	t := s.tagsFor(o.Service, o.Variant)
	bp := s.bufs.Get().(*[]byte)
	w := lineWriter{b: (*bp)[:0], prefix: s.prefix}
	in, suf := t.infix, t.suffix
	if o.Request {
		// A record that stands for 1/p requests is sent with statsd's sample rate @p, which
		// the server scales back.
		count := "|c"
		if wt := o.weight(); wt > 1 {
			count = "|c|@" + strconv.FormatFloat(1/wt, 'g', -1, 64)
		}
		w.int(statRequests, in, 1, count, suf)
		switch {
		case !o.Retrieved:
			w.int(statNotSeen, in, 1, count, suf)
		case o.Documents == 0:
			w.int(statRetrieved, in, 0, "|g", suf)
			w.int(statEmpty, in, 1, count, suf)
		default:
			w.int(statRetrieved, in, int64(o.Documents), "|g", suf)
		}
		if o.Scored {
			w.gauge(statAvgRelevance, in, o.MeanScore, suf)
		}
		if o.Answered {
			w.int(statAnswerLength, in, o.AnswerWords, "|g", suf)
			if o.OutputTokens > 0 {
				w.int(statAnswerTokens, in, o.OutputTokens, "|g", suf)
			}
		}
		if o.CitationsKnown {
			w.int(statCitations, in, int64(o.Citations), "|g", suf)
		}
		if o.Refusal {
			w.int(statRefusals, in, 1, count, suf)
		}
		for i, ms := range o.LatencyMS {
			if ms > 0 {
				w.float(statLatency[i], in, ms, "|ms", suf)
			}
		}
	}
	if o.HasFeedback {
		w.gauge(statUserFeedback, in, o.FeedbackScore, suf)
		w.int(statFeedback, t.sentiment[o.Sentiment], 1, "|c", t.sentSuf[o.Sentiment])
	}
	switch {
	case len(w.b) == 0:
	case len(w.b) < s.flushBytes:
		if _, err := s.sender.Send(w.b); err != nil {
			s.errs.Inc()
		}
	default:
		// Longer than a packet (long service names, a small flush_bytes): queue line by line
		// so no packet grows past flush_bytes unless one line does.
		for line := range bytes.SplitSeq(w.b, []byte{'\n'}) {
			if _, err := s.sender.Send(line); err != nil {
				s.errs.Inc()
				break
			}
		}
	}
	*bp = w.b
	s.bufs.Put(bp)
}

// Shutdown implements Recorder: closing the buffered sender flushes its buffer in one last
// packet and closes the socket.
func (s *statsdRecorder) Shutdown(context.Context) error {
	if err := s.sender.Close(); err != nil {
		return fmt.Errorf("close statsd sender: %w", err)
	}
	return nil
}
