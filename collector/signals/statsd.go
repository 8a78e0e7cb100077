package signals

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/cactus/go-statsd-client/v5/statsd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
)

// statsd stat names, under the configured prefix (default "rag").
const (
	statRequests     = "requests"         // counter
	statRetrieved    = "retrieved_count"  // gauge
	statAvgRelevance = "avg_relevance"    // gauge (float)
	statAnswerLength = "answer_length"    // gauge
	statCitations    = "citations"        // gauge
	statEmpty        = "empty_retrievals" // counter
	statUserFeedback = "user_feedback"    // gauge (float, -1..1)
	statFeedback     = "feedback"         // counter, tagged with sentiment
)

var statLatency = [numStages]string{"latency.retrieval", "latency.generation", "latency.total"} // timings (ms)

// statsdRecorder writes one line per signal to a buffered UDP client. Sending happens on the
// client's flush goroutine; a failed send is counted and dropped, never retried or waited on.
type statsdRecorder struct {
	client statsd.Statter
	errs   prometheus.Counter
	tagged bool
	tags   sync.Map // service -> []statsd.Tag; bounded by labels.ServiceSet
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

// ResolveInterval is how often a statsd endpoint given by host name is resolved again, so a
// moved statsd server (a rescheduled pod, a DNS change) keeps receiving.
const ResolveInterval = 30 * time.Second

// udpSender sends to an IP address as is and re-resolves a host name every ResolveInterval.
func udpSender(addr string) (statsd.Sender, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil && net.ParseIP(host) == nil {
		return statsd.NewResolvingSimpleSender(addr, ResolveInterval)
	}
	return statsd.NewSimpleSender(addr)
}

// newStatsdRecorder starts a buffered client; newSender (nil: a UDP sender) is for tests.
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
	clientFormat := format
	if clientFormat == 0 {
		clientFormat = statsd.SuffixOctothorpe // unused: no tags are passed
	}
	client, err := statsd.NewClientWithSender(buffered, c.Prefix, clientFormat)
	if err != nil {
		_ = buffered.Close()
		return nil, err
	}
	return &statsdRecorder{client: client, errs: errs, tagged: format != 0}, nil
}

func (s *statsdRecorder) tagsFor(service string) []statsd.Tag {
	if !s.tagged {
		return nil
	}
	if t, ok := s.tags.Load(service); ok {
		return t.([]statsd.Tag)
	}
	t := []statsd.Tag{{"service", service}}
	s.tags.Store(service, t)
	return t
}

func (s *statsdRecorder) check(err error) {
	if err != nil {
		s.errs.Inc()
	}
}

// Record implements Recorder.
func (s *statsdRecorder) Record(_ context.Context, o Observation) {
	tags := s.tagsFor(o.Service)
	c := s.client
	if o.Request {
		s.check(c.Inc(statRequests, 1, 1, tags...))
		s.check(c.Gauge(statRetrieved, int64(o.Documents), 1, tags...))
		if o.Documents == 0 {
			s.check(c.Inc(statEmpty, 1, 1, tags...))
		}
		if o.Scored {
			s.check(s.gaugeFloat(statAvgRelevance, o.MeanScore, tags))
		}
		if o.Answered {
			s.check(c.Gauge(statAnswerLength, o.AnswerTokens, 1, tags...))
			s.check(c.Gauge(statCitations, int64(o.Citations), 1, tags...))
		}
		for i, ms := range o.LatencyMS {
			if ms > 0 {
				s.check(c.Raw(statLatency[i], strconv.FormatFloat(ms, 'f', -1, 64)+"|ms", 1, tags...))
			}
		}
	}
	if o.HasFeedback {
		s.check(s.gaugeFloat(statUserFeedback, o.FeedbackScore, tags))
		ft := tags
		if s.tagged {
			ft = []statsd.Tag{{"service", o.Service}, {"sentiment", o.Sentiment.String()}}
		}
		s.check(c.Inc(statFeedback, 1, 1, ft...))
	}
}

// gaugeFloat writes a float gauge. A negative gauge value is sent as "0" then the delta
// ("-0.5" alone would be read as a decrement by statsd servers).
func (s *statsdRecorder) gaugeFloat(stat string, v float64, tags []statsd.Tag) error {
	ext, ok := s.client.(statsd.ExtendedStatSender)
	if !ok {
		return fmt.Errorf("statsd client without float gauges")
	}
	if v < 0 {
		if err := ext.GaugeFloat(stat, 0, 1, tags...); err != nil {
			return err
		}
		return ext.GaugeFloatDelta(stat, v, 1, tags...)
	}
	return ext.GaugeFloat(stat, v, 1, tags...)
}

// Shutdown implements Recorder: closing the client flushes its buffer in one last packet.
func (s *statsdRecorder) Shutdown(context.Context) error {
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("close statsd client: %w", err)
	}
	return nil
}
