package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// completionRequest is the subset of the OpenAI (and vLLM/SGLang extension)
// request body the simulator honours. After the intake's fast path a long
// message content or prompt is a placeholder here (see literals): read them
// through analyzePrompt only.
type completionRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           int             `json:"min_tokens"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	Stop                json.RawMessage `json:"stop"`
	Temperature         *float64        `json:"temperature"`
	Seed                *int64          `json:"seed"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
}

// promptInfo is what the simulator learns from a prompt.
type promptInfo struct {
	tokens int
	pages  []uint64 // chained prefix-cache page hashes
	hash   uint64   // whole-prompt hash, for reproducible choices
	text   string   // where a GSM8K question is looked for
}

// messageContent is a chat message content: a string, or an array of parts
// of which the text parts count.
type messageContent struct {
	text  string
	parts []contentPart
	isArr bool
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// readContent reads a message content. A string is its raw bytes when it
// holds no escape (invalid UTF-8 kept), else its decoded value; a part's
// text is its decoded value. Placeholders resolve to their literals' text.
func readContent(raw json.RawMessage, lits *literals) (messageContent, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return messageContent{}, nil
	}
	if raw[0] == '"' {
		if i, ok := lits.placeholderRaw(raw); ok {
			return messageContent{text: lits.value(i, false)}, nil
		}
		// Fast path for long prompts that took the decoder's path: the
		// decoder already validated raw, so a string without escapes is its bytes.
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
			return messageContent{text: string(raw[1 : len(raw)-1])}, nil
		}
		var s string
		err := json.Unmarshal(raw, &s)
		return messageContent{text: s}, err
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return messageContent{}, errors.New("content must be a string or an array of content parts")
	}
	for i := range parts {
		if j, ok := lits.placeholder(parts[i].Text); ok {
			parts[i].Text = lits.value(j, true)
		}
	}
	return messageContent{parts: parts, isArr: true}, nil
}

// hash mixes the content into h: the text parts joined by newlines. With
// keep it also returns that text as a string of its own (not a view).
func (c messageContent) hash(h *prefixHasher, keep bool) string {
	if !c.isArr {
		h.text(c.text)
		if keep {
			return strings.Clone(c.text)
		}
		return ""
	}
	var b strings.Builder
	for i, p := range c.parts {
		if p.Type != "text" && p.Type != "" {
			continue
		}
		if i > 0 {
			h.text("\n")
			if keep {
				b.WriteByte('\n')
			}
		}
		h.text(p.Text)
		if keep {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// analyzePrompt counts prompt tokens (no chat-template overhead: the count
// is exactly the words in the messages) and hashes prefix-cache pages.
// Message roles and boundaries enter the hash but not the count.
//
// keepText keeps the text a GSM8K question is looked for in (info.text);
// without a GSM8K split nothing reads it, so a long prompt is not copied.
// lits, when not nil, holds the long string literals that placeholders in
// req stand for (see cutLiterals).
func analyzePrompt(req *completionRequest, chat bool, blockTokens int, keepText bool, lits *literals) (promptInfo, error) {
	h := newPrefixHasher(blockTokens)
	var info promptInfo
	if chat {
		if len(req.Messages) == 0 {
			return info, errors.New("messages: at least one message is required")
		}
		for i, m := range req.Messages {
			c, err := readContent(m.Content, lits)
			if err != nil {
				return info, fmt.Errorf("messages[%d].content: %v", i, err)
			}
			h.mark(m.Role)
			text := c.hash(h, keepText && m.Role == "user")
			if m.Role == "user" {
				info.text = text
			}
		}
	} else {
		raw := req.Prompt
		if len(raw) == 0 || string(raw) == "null" {
			return info, errors.New("prompt: required")
		}
		var s string
		var strs []string
		var ids []int64
		var idLists [][]int64
		switch {
		case json.Unmarshal(raw, &s) == nil:
		case json.Unmarshal(raw, &strs) == nil:
			if len(strs) != 1 {
				return info, fmt.Errorf("prompt: the simulator serves one prompt per request, got %d", len(strs))
			}
			s = strs[0]
		case json.Unmarshal(raw, &ids) == nil:
		case json.Unmarshal(raw, &idLists) == nil:
			if len(idLists) != 1 {
				return info, fmt.Errorf("prompt: the simulator serves one prompt per request, got %d", len(idLists))
			}
			ids = idLists[0]
		default:
			return info, errors.New("prompt: must be a string, [string], [int] or [[int]]")
		}
		if ids != nil {
			// token ids: each id is one token
			var b []byte
			for _, id := range ids {
				b = strconv.AppendInt(append(b[:0], ' ', 't'), id, 36)
				h.text(string(b))
			}
		} else {
			if j, ok := lits.placeholder(s); ok {
				s = lits.value(j, true)
			}
			h.text(s)
			if keepText {
				info.text = strings.Clone(s)
			}
		}
	}
	info.pages = h.finish()
	info.tokens = h.tokens
	info.hash = h.h
	return info, nil
}

// stopStrings reads "stop": a string or an array of strings.
func stopStrings(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("stop: must be a string or an array of strings")
	}
	out := list[:0]
	for _, x := range list {
		if x != "" {
			out = append(out, x)
		}
	}
	return out, nil
}
