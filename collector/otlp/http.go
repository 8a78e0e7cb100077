package otlp

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ragwatch/ragwatch/collector/ingest"
	"github.com/ragwatch/ragwatch/collector/record"
)

const (
	ctProtobuf = "application/x-protobuf"
	ctJSON     = "application/json"

	// TracesPath is where OTLP/HTTP exporters send traces.
	TracesPath = "/v1/traces"
)

// HTTPHandler serves OTLP/HTTP trace export on TracesPath. It is what the HTTP receiver serves;
// exposed so it can be mounted elsewhere or tested without a listener.
func (r *Receiver) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(TracesPath, r.serveTraces)
	return mux
}

func (r *Receiver) serveTraces(w http.ResponseWriter, req *http.Request) {
	const rcv = ingest.ReceiverOTLPHTTP
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeStatus(w, ctJSON, http.StatusMethodNotAllowed, codes.Unimplemented, fmt.Sprintf("method %s not allowed, use POST", req.Method))
		return
	}
	if r.set.Refuse != nil && r.set.Refuse() { // before the body is read: refusing costs no memory
		r.set.Metrics.Rejected(rcv, ingest.ReasonOverloaded)
		secs := int((r.set.RefuseRetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		writeStatus(w, mt, http.StatusServiceUnavailable, codes.Unavailable, "ragwatch is over its memory limit, retry later")
		return
	}
	mediaType, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || (mediaType != ctProtobuf && mediaType != ctJSON) {
		r.set.Metrics.Rejected(rcv, ingest.ReasonContentType)
		writeStatus(w, ctJSON, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("unsupported Content-Type %q: use %s or %s", req.Header.Get("Content-Type"), ctProtobuf, ctJSON))
		return
	}
	body, status, msg := r.readBody(req)
	if status != 0 {
		reason := ingest.ReasonMalformed
		switch status {
		case http.StatusRequestEntityTooLarge:
			reason = ingest.ReasonTooLarge
		case http.StatusUnsupportedMediaType:
			reason = ingest.ReasonContentType
		}
		r.set.Metrics.Rejected(rcv, reason)
		writeStatus(w, mediaType, status, codes.InvalidArgument, msg)
		return
	}

	otlpReq := ptraceotlp.NewExportRequest()
	if mediaType == ctJSON {
		if record.CheckJSON(body, r.limits.MaxJSONDepth, 0) != nil {
			r.set.Metrics.Rejected(rcv, ingest.ReasonLimits)
			writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument,
				fmt.Sprintf("JSON nests deeper than the limit of %d", r.limits.MaxJSONDepth))
			return
		}
		err = otlpReq.UnmarshalJSON(body)
	} else {
		err = otlpReq.UnmarshalProto(body)
	}
	if err != nil {
		r.set.Metrics.Rejected(rcv, ingest.ReasonMalformed)
		writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument, decodeMessage(mediaType, err))
		return
	}

	_, partial, err := r.consume(req.Context(), rcv, otlpReq.Traces())
	if err != nil {
		var rej *rejection
		if errors.As(err, &rej) {
			writeStatus(w, mediaType, http.StatusBadRequest, codes.InvalidArgument, rej.msg)
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
	resp := ptraceotlp.NewExportResponse()
	if partial != nil {
		resp.PartialSuccess().SetRejectedSpans(partial.Rejected)
		resp.PartialSuccess().SetErrorMessage(partial.Reason)
	}
	var out []byte
	if mediaType == ctJSON {
		out, err = resp.MarshalJSON()
	} else {
		out, err = resp.MarshalProto()
	}
	if err != nil {
		writeStatus(w, mediaType, http.StatusInternalServerError, codes.Internal, "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// readBody reads the whole body, decompressing gzip, within MaxRequestBytes after
// decompression. A non-zero status is the HTTP error to answer with msg.
func (r *Receiver) readBody(req *http.Request) ([]byte, int, string) {
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
		zr, err := gzip.NewReader(src)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the limit of %d bytes", limit)
			}
			return nil, http.StatusBadRequest, "invalid gzip body: " + err.Error()
		}
		defer zr.Close()
		src = zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Encoding %q: use gzip or none", enc)
	}
	var buf bytes.Buffer
	if req.ContentLength > 0 && req.Header.Get("Content-Encoding") == "" {
		buf.Grow(int(req.ContentLength))
	}
	n, err := io.Copy(&buf, io.LimitReader(src, limit+1))
	if n > limit {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the limit of %d bytes", limit)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the limit of %d bytes", limit)
		}
		return nil, http.StatusBadRequest, "read body: " + err.Error()
	}
	return buf.Bytes(), 0, ""
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
