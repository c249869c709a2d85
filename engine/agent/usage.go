package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// ClaudeTranscriptUsage adds up the token usage in a Claude Code transcript
// (the JSONL file at a hook's transcript_path): one "usage" per assistant
// message. Claude writes a line per content block, repeating the message's
// id and usage, so each message id counts once. Lines that are not JSON, or
// longer than 8 MiB, are skipped: a transcript is the agent's to write.
func ClaudeTranscriptUsage(r io.Reader) (Usage, error) {
	var total Usage
	seen := map[string]bool{}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, 8<<20)
		if len(line) > 0 {
			var rec struct {
				Type    string `json:"type"`
				Message struct {
					ID    string `json:"id"`
					Usage *struct {
						In  int64 `json:"input_tokens"`
						Out int64 `json:"output_tokens"`
						CR  int64 `json:"cache_read_input_tokens"`
						CW  int64 `json:"cache_creation_input_tokens"`
					} `json:"usage"`
				} `json:"message"`
				CostUSD float64 `json:"costUSD"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Type == "assistant" && rec.Message.Usage != nil {
				if id := rec.Message.ID; id == "" || !seen[id] {
					seen[id] = id != ""
					u := rec.Message.Usage
					total = total.Add(Usage{InputTokens: u.In, OutputTokens: u.Out, CacheRead: u.CR, CacheWrite: u.CW, CostUSD: rec.CostUSD})
				}
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("read Claude transcript: %w", err)
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// limit is dropped (read through, returned empty).
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !over {
			if len(line)+len(chunk) > limit {
				over, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if over {
			line = nil
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line, err
	}
}
