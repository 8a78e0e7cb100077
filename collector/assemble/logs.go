package assemble

import (
	"context"

	"github.com/ragwatch/ragwatch/collector/span"
)

// Outcomes of ragwatch_log_records_total (indexes of metrics.events).
const (
	evJoined = iota
	evOrphaned
	evLate
	evNoSpan
	evUnread
	evIgnored
)

var logOutcomes = [...]string{
	evJoined:   "joined",
	evOrphaned: "orphaned",
	evLate:     "late",
	evNoSpan:   "no_span",
	evUnread:   "unread",
	evIgnored:  "ignored",
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
// already assembled is late, counted and dropped. From the first carrier on, a new trace is
// complete (complete_wait) only with its generation's output, which may still come as a log
// record: until then it waits assembly.wait after its root, as for a straggler span.
func (a *Assembler) AddEvents(carriers []span.Span) {
	now := a.now()
	a.mu.Lock()
	light := a.bytes <= a.fastTickBytes
	a.eventsSeen = true
	var tr *trace
	late := 0
	for i := range carriers {
		s := &carriers[i]
		if tr == nil || tr.id != s.TraceID {
			tr = a.traces[s.TraceID]
		}
		if tr == nil && a.done.has(s.TraceID) {
			late++
			span.ReleaseSpans(carriers[i : i+1])
			continue
		}
		if tr == nil {
			// Room for its spans too, which usually follow: a slice sized for the carriers
			// alone would be grown (copied) twice by a five-span trace.
			tr = a.newTrace(s.TraceID, now, maxSpanCapHint)
		}
		if len(tr.spans) == maxSpansPerTrace {
			late++
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
	kick := false
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
	a.m.events[evLate].Add(float64(late))
	if kick {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}
