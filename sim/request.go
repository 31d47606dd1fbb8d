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
// request body the simulator honours.
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

// messageText flattens a chat message content: a string, or an array of
// parts of which the text parts count.
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		// Fast path for AgentX-sized prompts (hundreds of KB): the decoder
		// already validated raw, so a string without escapes is its bytes.
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
			return string(raw[1 : len(raw)-1]), nil
		}
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" && p.Type != "" {
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// analyzePrompt counts prompt tokens (no chat-template overhead: the count
// is exactly the words in the messages) and hashes prefix-cache pages.
// Message roles and boundaries enter the hash but not the count.
func analyzePrompt(req *completionRequest, chat bool, blockTokens int) (promptInfo, error) {
	h := newPrefixHasher(blockTokens)
	var info promptInfo
	if chat {
		if len(req.Messages) == 0 {
			return info, errors.New("messages: at least one message is required")
		}
		for i, m := range req.Messages {
			text, err := messageText(m.Content)
			if err != nil {
				return info, fmt.Errorf("messages[%d].content: %v", i, err)
			}
			h.mark(m.Role)
			h.text(text)
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
			h.text(s)
			info.text = s
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
