package otlp

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
)

const (
	ctProtobuf = "application/x-protobuf"
	ctJSON     = "application/json"

	// TracesPath is where OTLP/HTTP exporters send traces.
	TracesPath = "/v1/traces"
	// LogsPath is where OTLP/HTTP exporters send logs (served when Settings.Logs is set).
	LogsPath = "/v1/logs"
)

// HTTPHandler serves OTLP/HTTP trace export on TracesPath, and log export on LogsPath when
// Settings.Logs is set. It is what the HTTP receiver serves;
// exposed so it can be mounted elsewhere or tested without a listener.
func (r *Receiver) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(TracesPath, r.serveTraces)
	if r.set.Logs != nil {
		mux.HandleFunc(LogsPath, r.serveLogs)
	}
	return mux
}

// declaredSize is what a request's body can take once read and decompressed: its
// Content-Length when that bounds it, else the largest body accepted.
func (r *Receiver) declaredSize(req *http.Request) int64 {
	enc := strings.TrimSpace(req.Header.Get("Content-Encoding"))
	if req.ContentLength >= 0 && (enc == "" || strings.EqualFold(enc, "identity")) {
		return min(req.ContentLength, int64(r.limits.MaxRequestBytes))
	}
	return int64(r.limits.MaxRequestBytes)
}

func (r *Receiver) serveTraces(w http.ResponseWriter, req *http.Request) {
	const rcv = ingest.ReceiverOTLPHTTP
	body, mediaType, release := r.intake(w, req)
	if release != nil {
		defer release()
	}
	if body == nil {
		return
	}
	defer putBody(body)
	var err error

	if pc, ok := r.set.Next.(ProtoConsumer); ok && mediaType == ctProtobuf {
		malformed, err := r.consumeProto(req.Context(), rcv, pc, *body)
		if malformed != nil {
			writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument, decodeMessage(mediaType, malformed))
			return
		}
		r.answer(w, mediaType, nil, err)
		return
	}
	otlpReq := ptraceotlp.NewExportRequest()
	if mediaType == ctJSON {
		if record.CheckJSON(*body, r.limits.MaxJSONDepth, 0) != nil {
			r.set.Metrics.Rejected(rcv, ingest.ReasonLimits)
			writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument,
				fmt.Sprintf("JSON nests deeper than the limit of %d", r.limits.MaxJSONDepth))
			return
		}
		err = otlpReq.UnmarshalJSON(*body)
	} else {
		err = otlpReq.UnmarshalProto(*body)
	}
	if err != nil {
		r.set.Metrics.Rejected(rcv, ingest.ReasonMalformed)
		writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument, decodeMessage(mediaType, err))
		return
	}

	_, partial, err := r.consume(req.Context(), rcv, otlpReq.Traces())
	r.answer(w, mediaType, partial, err)
}

// serveLogs takes an OTLP/HTTP log export: protobuf straight to the LogsConsumer, OTLP/JSON
// through pdata re-encoded as protobuf (one decoder of log records, the wire one).
func (r *Receiver) serveLogs(w http.ResponseWriter, req *http.Request) {
	const rcv = ingest.ReceiverOTLPHTTP
	body, mediaType, release := r.intake(w, req)
	if release != nil {
		defer release()
	}
	if body == nil {
		return
	}
	defer putBody(body)
	in := *body
	if mediaType == ctJSON {
		if record.CheckJSON(in, r.limits.MaxJSONDepth, 0) != nil {
			r.set.Metrics.Rejected(rcv, ingest.ReasonLimits)
			writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument,
				fmt.Sprintf("JSON nests deeper than the limit of %d", r.limits.MaxJSONDepth))
			return
		}
		logsReq := plogotlp.NewExportRequest()
		err := logsReq.UnmarshalJSON(in)
		if err == nil {
			in, err = logsReq.MarshalProto()
		}
		if err != nil {
			r.set.Metrics.Rejected(rcv, ingest.ReasonMalformed)
			writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument, decodeMessage(mediaType, err))
			return
		}
	}
	malformed, err := r.consumeLogs(req.Context(), rcv, in)
	if malformed != nil {
		writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument, decodeMessage(ctProtobuf, malformed))
		return
	}
	r.answer(w, mediaType, nil, err)
}

// intake is what every OTLP/HTTP export goes through before it is decoded: the method, the
// memory guard (Refuse, then Admit with the declared size), the Content-Type, and the body,
// read and decompressed within the limits. It answers and counts a refusal itself and then
// returns a nil body; else the body (hand it back with putBody) and its media type. release,
// when not nil, is the admission to release once the request is handled, whatever the body.
func (r *Receiver) intake(w http.ResponseWriter, req *http.Request) (body *[]byte, mediaType string, release func()) {
	const rcv = ingest.ReceiverOTLPHTTP
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeStatus(w, ctJSON, http.StatusMethodNotAllowed, codes.Unimplemented, fmt.Sprintf("method %s not allowed, use POST", req.Method))
		return nil, "", nil
	}
	refused := r.set.Refuse != nil && r.set.Refuse() // before the body is read: refusing costs no memory
	if !refused && r.set.Admit != nil {
		rel, ok := r.set.Admit(r.declaredSize(req))
		if ok {
			release = rel
		}
		refused = !ok
	}
	if refused {
		r.set.Metrics.Rejected(rcv, ingest.ReasonOverloaded)
		secs := int((r.set.RefuseRetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		writeStatus(w, mt, http.StatusServiceUnavailable, codes.Unavailable, "ragwatch is over its memory limit, retry later")
		return nil, "", release
	}
	mediaType, err := parseContentType(req.Header.Get("Content-Type"))
	if err != nil || (mediaType != ctProtobuf && mediaType != ctJSON) {
		r.set.Metrics.Rejected(rcv, ingest.ReasonContentType)
		writeStatus(w, ctJSON, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("unsupported Content-Type %q: use %s or %s", req.Header.Get("Content-Type"), ctProtobuf, ctJSON))
		return nil, "", release
	}
	body, status, msg := r.readBody(req)
	if status != 0 {
		if body != nil {
			putBody(body)
		}
		reason := ingest.ReasonMalformed
		switch status {
		case http.StatusRequestEntityTooLarge:
			reason = ingest.ReasonTooLarge
		case http.StatusUnsupportedMediaType:
			reason = ingest.ReasonContentType
		}
		r.set.Metrics.Rejected(rcv, reason)
		writeStatus(w, mediaType, status, codes.InvalidArgument, msg)
		return nil, "", release
	}
	return body, mediaType, release
}

// answer writes the response to an export the consumer took (err nil, partial maybe) or not.
func (r *Receiver) answer(w http.ResponseWriter, mediaType string, partial *ingest.PartialError, err error) {
	if err != nil {
		var rej *span.Error
		if errors.As(err, &rej) {
			writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument, rej.Msg)
			return
		}
		secs := int((r.set.RetryAfter + 999_999_999) / 1_000_000_000)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		if errors.Is(err, ingest.ErrOverloaded) {
			writeStatus(w, mediaType, http.StatusTooManyRequests, codes.ResourceExhausted, "ragwatch cannot take spans right now: "+err.Error())
			return
		}
		writeStatus(w, mediaType, http.StatusServiceUnavailable, codes.Unavailable, "ragwatch cannot take spans right now: "+err.Error())
		return
	}
	var out []byte
	switch {
	case partial == nil && mediaType == ctJSON:
		out = emptyResponseJSON
	case partial == nil:
		out = emptyResponse
	default:
		resp := ptraceotlp.NewExportResponse()
		resp.PartialSuccess().SetRejectedSpans(partial.Rejected)
		resp.PartialSuccess().SetErrorMessage(partial.Reason)
		if mediaType == ctJSON {
			out, err = resp.MarshalJSON()
		} else {
			out, err = resp.MarshalProto()
		}
	}
	if err != nil {
		writeStatus(w, mediaType, http.StatusInternalServerError, codes.Internal, "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// parseContentType is mime.ParseMediaType's media type, without parsing (and allocating) for
// the two values exporters send.
func parseContentType(ct string) (string, error) {
	if ct == ctProtobuf || ct == ctJSON {
		return ct, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	return mt, err
}

// readBody reads the whole body, decompressing gzip, within MaxRequestBytes after
// decompression. A non-zero status is the HTTP error to answer with msg. The body is in a
// pooled buffer: the caller hands it back with putBody once nothing refers to it any more
// (pdata copies what it decodes).
func (r *Receiver) readBody(req *http.Request) (*[]byte, int, string) {
	limit := int64(r.limits.MaxRequestBytes)
	if req.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body of %d bytes is over the limit of %d", req.ContentLength, limit)
	}
	// The compressed body can be no larger than the limit either (gzip of incompressible data
	// adds a few bytes; allow for it).
	var src io.Reader = http.MaxBytesReader(nil, req.Body, limit+1024)
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := getGzip(src)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the limit of %d bytes", limit)
			}
			return nil, http.StatusBadRequest, "invalid gzip body: " + err.Error()
		}
		defer putGzip(zr)
		src = &zr.zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Encoding %q: use gzip or none", enc)
	}
	hint := 0
	if req.ContentLength > 0 && req.Header.Get("Content-Encoding") == "" {
		hint = int(req.ContentLength)
	}
	body := getBody()
	var err error
	*body, err = readAll(*body, io.LimitReader(src, limit+1), hint)
	if int64(len(*body)) > limit {
		putBody(body)
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the limit of %d bytes", limit)
	}
	if err != nil {
		putBody(body)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the limit of %d bytes", limit)
		}
		return nil, http.StatusBadRequest, "read body: " + err.Error()
	}
	return body, 0, ""
}

// readAll appends what src holds to dst[:0] until io.EOF, like io.ReadAll, sized for hint
// bytes up front so that a body of known length is read without growing.
func readAll(dst []byte, src io.Reader, hint int) ([]byte, error) {
	dst = dst[:0]
	if hint > 0 && cap(dst) < hint+1 { // +1: the read that sees io.EOF needs room too
		dst = make([]byte, 0, bodyCap(hint+1))
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := src.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// maxPooledBody is the largest body buffer kept for reuse, so that a rare huge export is not
// held; typical exports (a batch of 50 RAG traces is ≈ 350 KB) are well below it.
const maxPooledBody = 4 << 20

// bodyCap is the capacity of a new body buffer for n bytes: a quarter more, so that a pooled
// buffer also fits the next export that is a little larger instead of being replaced.
func bodyCap(n int) int { return n + n/4 }

// bodyPool holds *[]byte request body buffers.
var bodyPool sync.Pool

func getBody() *[]byte {
	if b, ok := bodyPool.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func putBody(b *[]byte) {
	if b == nil || cap(*b) > maxPooledBody {
		return
	}
	*b = (*b)[:0]
	bodyPool.Put(b)
}

// gzipReader is a gzip decompressor with its input buffer, reused across requests: a fresh
// one allocates ≈ 45 KB of flate state.
type gzipReader struct {
	br *bufio.Reader
	zr gzip.Reader
}

var gzipPool sync.Pool // of *gzipReader

func getGzip(src io.Reader) (*gzipReader, error) {
	g, ok := gzipPool.Get().(*gzipReader)
	if !ok {
		g = &gzipReader{br: bufio.NewReader(src)}
	} else {
		g.br.Reset(src)
	}
	if err := g.zr.Reset(g.br); err != nil {
		putGzip(g)
		return nil, err
	}
	return g, nil
}

func putGzip(g *gzipReader) {
	g.br.Reset(nil) // keep no reference to the request
	gzipPool.Put(g)
}

// decodeMessage turns a pdata decode error into what the client reads. pdata reports ids that
// are not hex with an internal name; say what is wrong instead, since exporters that write
// base64 ids are a known mistake.
func decodeMessage(mediaType string, err error) string {
	msg := err.Error()
	if mediaType == ctJSON {
		if strings.Contains(msg, "ID.UnmarshalJSONIter") {
			return "invalid OTLP/JSON: traceId and spanId must be hex strings (32 and 16 hex digits), as the OTLP/JSON spec requires; base64 ids are not accepted: " + msg
		}
		return "invalid OTLP/JSON: " + msg
	}
	return "invalid OTLP protobuf: " + msg
}

// writeStatus answers with a google.rpc.Status in the request's encoding, as OTLP/HTTP
// requires for errors.
func writeStatus(w http.ResponseWriter, mediaType string, httpStatus int, code codes.Code, msg string) {
	// Decoder messages can quote the input; protobuf strings must be valid UTF-8.
	st := &spb.Status{Code: int32(code), Message: strings.ToValidUTF8(msg, "\uFFFD")}
	var out []byte
	var err error
	if mediaType == ctProtobuf {
		out, err = proto.Marshal(st)
	} else {
		mediaType = ctJSON
		out, err = protojson.Marshal(st)
	}
	if err != nil {
		http.Error(w, msg, httpStatus)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(httpStatus)
	_, _ = w.Write(out)
}
