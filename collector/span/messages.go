package span

import (
	"slices"
	"strings"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/internal/record"
)

// MaxIndexed bounds the {i} of flattened keys (documents, messages), so a hostile index cannot
// allocate.
const MaxIndexed = record.MaxDocuments

// Message is one chat message as a convention flattens it; Parts are its text parts.
type Message struct {
	Role    string
	Content string
	Parts   []string
}

// Text is the message's content, else its parts joined by newlines.
func (m *Message) Text() string {
	if m.Content != "" {
		return m.Content
	}
	return strings.Join(m.Parts, "\n")
}

// SetOIMessage sets a field of llm.{input,output}_messages from "{i}.message.{field}".
func SetOIMessage(msgs []Message, rest string, v Value) []Message {
	i, field, ok := conventions.SplitIndex(rest, MaxIndexed)
	if !ok || !strings.HasPrefix(field, "message.") {
		return msgs
	}
	if f := slices.Index(conventions.MsgFields, field); f >= 0 { // its position, as a shared key's
		return SetMessage(msgs, i, f, v)
	}
	msgs = growMessages(msgs, i)
	if parts, ok := strings.CutPrefix(field, "message.contents."); ok {
		j, sub, ok := conventions.SplitIndex(parts, MaxIndexed)
		if ok && sub == "message_content.text" {
			msgs[i].Parts = SetIndexed(msgs[i].Parts, j, v.Text())
		}
	}
	return msgs
}

// SetMessage sets field f (msgRole, msgContent) of OpenInference message i, growing msgs up to
// it.
func SetMessage(msgs []Message, i, f int, v Value) []Message {
	msgs = growMessages(msgs, i)
	if f == conventions.MsgRole {
		msgs[i].Role = v.Text()
	} else {
		msgs[i].Content = v.Text()
	}
	return msgs
}

// growMessages extends msgs with empty messages up to index i, allocating once for short lists.
func growMessages(msgs []Message, i int) []Message {
	if len(msgs) > i {
		return msgs
	}
	if cap(msgs) <= i {
		msgs = slices.Grow(msgs, max(i+1, 4)-len(msgs))
	}
	n := len(msgs)
	msgs = msgs[:i+1]
	clear(msgs[n:])
	return msgs
}

// SetRoleContent sets gen_ai.prompt.{i}.role|content style messages.
func SetRoleContent(msgs []Message, rest string, v Value) []Message {
	i, field, ok := conventions.SplitIndex(rest, MaxIndexed)
	if !ok {
		return msgs
	}
	// The field's position in legacyFields, as a shared key's; -1 for another field (the
	// message is there, without it).
	return SetLegacyMessage(msgs, i, slices.Index(conventions.LegacyFields, field), v)
}

// SetLegacyMessage sets field f (msgRole, msgContent; any other: none) of gen_ai.prompt or
// gen_ai.completion message i, growing msgs up to it.
func SetLegacyMessage(msgs []Message, i, f int, v Value) []Message {
	msgs = growMessages(msgs, i)
	switch f {
	case conventions.MsgRole:
		msgs[i].Role = v.Text()
	case conventions.MsgContent:
		msgs[i].Content = contentText(v)
	}
	return msgs
}

// contentText reads a message content that may be a JSON list of content blocks (OpenLLMetry
// writes Anthropic's and OpenAI's multi-part content that way): the text of its text blocks.
// Anything else is the text itself.
func contentText(v Value) string {
	s := v.Text()
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return s
	}
	blocks, ok := ParseJSON(s).([]any)
	if !ok || len(blocks) == 0 {
		return s
	}
	var parts []string
	for _, b := range blocks {
		m, ok := b.(map[string]any)
		if !ok || AsString(m["type"]) == "" {
			return s // not content blocks
		}
		if t := AsString(m["text"]); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// MessageFromEvent reads a v1.36-era GenAI event: `content` (string or structured), or a
// `message` object ({role, content}), or the Python SDK's `gen_ai.event.content` JSON.
func MessageFromEvent(ev *Event, role string) Message {
	m := Message{Role: role}
	for i := range ev.Attrs {
		k, v := ev.Attrs[i].Key, ev.Attrs[i].Value
		switch k {
		case "role", "gen_ai.role":
			m.Role = v.Text()
		case "content", "gen_ai.content":
			if v.Type == TypeRaw {
				m.Content = TextOf(v.Raw(), messageTextKeys, 0)
			} else {
				m.Content = v.Text()
			}
		case "message", "gen_ai.event.content", "body":
			if x := v.Structured(); x != nil {
				if obj, ok := x.(map[string]any); ok {
					if msg, ok := obj["message"].(map[string]any); ok {
						obj = msg
					}
					if r := AsString(obj["role"]); r != "" {
						m.Role = r
					}
					if c := TextOf(obj["content"], messageTextKeys, 0); c != "" {
						m.Content = c
					}
					continue
				}
				if s, ok := x.(string); ok {
					m.Content = s
				}
			} else if v.Type == TypeStr && m.Content == "" {
				m.Content = v.Str()
			}
		}
	}
	return m
}

var messageTextKeys = []string{"content", "text", "parts"}

// LastUser is the index of the last user message that has text, or -1.
func LastUser(msgs []Message) int {
	for k := len(msgs) - 1; k >= 0; k-- {
		if HistoryRole(msgs[k].Role) == record.RoleUser && msgs[k].Text() != "" {
			return k
		}
	}
	return -1
}

// HistoryRole maps a message role to a history role: "" for roles the history leaves out.
func HistoryRole(role string) string {
	switch {
	case strings.EqualFold(role, record.RoleUser):
		return record.RoleUser
	case strings.EqualFold(role, record.RoleAssistant):
		return record.RoleAssistant
	}
	return ""
}

// SetIndexed sets l[i] to s, growing l up to i.
func SetIndexed(l []string, i int, s string) []string {
	for len(l) <= i {
		l = append(l, "")
	}
	l[i] = s
	return l
}
