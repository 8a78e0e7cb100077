package assemble

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/ragwatch/ragwatch/collector/facts"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Outcomes of ragwatch_log_records_total (indexes of metrics.events).
const (
	evJoined = iota
	evOrphaned
	evLate
	evLateDropped
	evNoSpan
	evUnread
	evIgnored
)

var logOutcomes = [...]string{
	evJoined:      "joined",
	evOrphaned:    "orphaned",
	evLate:        "late",
	evLateDropped: "late_dropped",
	evNoSpan:      "no_span",
	evUnread:      "unread",
	evIgnored:     "ignored",
}

// ConsumeLogs decodes one OTLP protobuf ExportLogsServiceRequest (span.DecodeLogs) and takes
// the GenAI events among its log records into the held traces, to be joined to their span at
// assembly; every other log record is counted and dropped. It returns the number of log
// records of the request, or the *span.Error that refuses it: then nothing is taken. body may
// be reused once it returns.
func (a *Assembler) ConsumeLogs(_ context.Context, body []byte, lim span.Limits) (int, error) {
	buf := spanBufs.Get().(*[]span.Span)
	carriers, c, werr := span.DecodeLogs(body, lim, (*buf)[:0])
	if werr == nil {
		a.m.events[evNoSpan].Add(float64(c.NoSpan))
		a.m.events[evUnread].Add(float64(c.Unread))
		a.m.events[evIgnored].Add(float64(c.Other))
		if len(carriers) > 0 {
			a.AddEvents(carriers)
		}
	}
	if cap(carriers) <= maxPooledSpanBuf {
		clear(carriers)
		*buf = carriers[:0]
		spanBufs.Put(buf)
	}
	if werr != nil {
		return 0, werr
	}
	return c.Records, nil
}

// AddEvents takes carriers of log-based events (span.DecodeLogs) into the held traces. A
// carrier of a trace not held yet opens it (its spans usually follow: a log exporter's batch
// is sent more often than a span exporter's) with its timeout as deadline; one of a trace
// already assembled is late: it waits for the worker's next step (at most max_traces of them),
// which reads what it says of the turn into record.Content for Settings.Content, to join the
// record that went by (deliverLateEvents). From the first carrier on, a new trace is
// complete (complete_wait) only with its generation's output, which may still come as a log
// record: until then it waits assembly.wait after its root, as for a straggler span.
func (a *Assembler) AddEvents(carriers []span.Span) {
	now := a.now()
	a.mu.Lock()
	light := a.bytes <= a.fastTickBytes
	a.eventsSeen = true
	var tr *trace
	dropped := 0
	kick := false
	for i := range carriers {
		s := &carriers[i]
		if tr == nil || tr.id != s.TraceID {
			tr = a.traces[s.TraceID]
		}
		if tr == nil && a.done.has(s.TraceID) {
			if a.content != nil && len(a.lateEvents) < a.cfg.MaxTraces {
				a.lateEvents = append(a.lateEvents, *s) // its pooled attributes with it
				kick = true
			} else {
				dropped++
				span.ReleaseSpans(carriers[i : i+1])
			}
			continue
		}
		if tr == nil {
			// Room for its spans too, which usually follow: a slice sized for the carriers
			// alone would be grown (copied) twice by a five-span trace.
			tr = a.newTrace(s.TraceID, now, span.MaxPooledTraceSpans)
		}
		if len(tr.spans) == maxSpansPerTrace {
			dropped++
			span.ReleaseSpans(carriers[i : i+1])
			continue
		}
		tr.spans = append(tr.spans, *s)
		tr.out |= eventsHeld
		oh := traceOverhead(tr.spans)
		size := spanSize(s) + oh - tr.overhead
		tr.overhead = oh
		tr.bytes += size
		a.bytes += size
		_, _, out := quickKind(s)
		if out && tr.out&outSeen == 0 {
			tr.out |= outSeen
			if a.early && tr.rootSeen && tr.complete() && tr.list != listComplete {
				// The output the complete trace waited for: released at complete_wait.
				a.schedule(tr, minTime(now.Add(a.cfg.CompleteWait), tr.deadline), listComplete)
			}
		}
	}
	for len(a.traces) > a.cfg.MaxTraces {
		a.evictOldest(EvictMaxTraces)
		kick = true
	}
	for a.bytes > a.cfg.MaxBytes && a.oldest != nil {
		a.evictOldest(EvictMaxBytes)
		kick = true
	}
	if light && a.bytes > a.fastTickBytes {
		// Heavy now: wake the worker, as Add does. The spans that follow find the traces
		// heavy already and do not.
		kick = true
	}
	a.m.held.Set(float64(len(a.traces)))
	a.m.heldBytes.Set(float64(a.bytes))
	a.mu.Unlock()
	a.m.events[evLateDropped].Add(float64(dropped))
	if kick {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// deliverLateEvents reads the carriers of events that came after their trace was assembled,
// one span's together (in arrival order, as JoinEvents would have put them on it), with the
// readers of span events (facts.Read, AnswerOf, LastUserText, HistoryOf), and hands what they
// say of the turn to Settings.Content as record.Content naming the trace and the event's span.
// Carriers whose events say nothing a record takes are counted late_dropped.
func (a *Assembler) deliverLateEvents(ctx context.Context, carriers []span.Span) error {
	slices.SortStableFunc(carriers, func(x, y span.Span) int {
		if c := bytes.Compare(x.TraceID[:], y.TraceID[:]); c != 0 {
			return c
		}
		return bytes.Compare(x.SpanID[:], y.SpanID[:])
	})
	var errs []error
	var events []span.Event
	for start := 0; start < len(carriers); {
		end := start + 1
		for end < len(carriers) && carriers[end].TraceID == carriers[start].TraceID && carriers[end].SpanID == carriers[start].SpanID {
			end++
		}
		group := carriers[start:end]
		events = events[:0]
		for i := range group {
			events = append(events, group[i].Events...)
		}
		s := span.Span{TraceID: group[0].TraceID, SpanID: group[0].SpanID, Service: group[0].Service, Events: events}
		var f facts.Facts
		facts.Read(&f, &s)
		c := record.Content{
			TraceID: s.TraceID.String(), SpanID: s.SpanID.String(), Service: s.Service,
			Answer: facts.AnswerOf(&f), Query: facts.LastUserText(&f),
		}
		c.History, _ = facts.HistoryOf(&f)
		if len(c.History) > 0 {
			r := record.Record{History: c.History}
			a.trimHistory(&r)
			c.History = r.History
		}
		span.ReleaseSpans(group)
		clear(events)
		start = end
		if c.Empty() {
			a.m.events[evLateDropped].Add(float64(len(group)))
			continue
		}
		a.m.events[evLate].Add(float64(len(group)))
		if err := a.content.ConsumeContent(ctx, c); err != nil {
			a.m.deliveryErrors.WithLabelValues("content").Inc()
			a.log.Warn("content consumer failed", "trace_id", c.TraceID, "err", err)
			errs = append(errs, err)
		}
	}
	clear(carriers)
	return errors.Join(errs...)
}
