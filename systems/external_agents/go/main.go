// A tool-calling agent in Go, standard library only: the unit's tools over MCP (Streamable HTTP, JSON-RPC by
// hand), the model through the gateway's OpenAI-compatible endpoint. Built once by the suite (`go build`, in the
// agent's sandbox) into its environment; nothing here knows the suite beyond the DAC_* environment variables.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

var client = &http.Client{Timeout: 10 * time.Minute}

type message map[string]any

// post sends a JSON body with the unit's token and decodes the JSON reply (or the first event of an SSE reply).
func post(url string, body any, reply any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	request, err := http.NewRequest("POST", url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	request.Header.Set("Authorization", "Bearer "+os.Getenv("DAC_TOKEN"))
	request.Header.Set("Content-Type", "application/json")
	request.Header.Set("Accept", "application/json, text/event-stream")
	response, err := client.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	raw, err := io.ReadAll(response.Body)
	if err != nil {
		return err
	}
	if response.StatusCode >= 400 {
		return fmt.Errorf("%s: HTTP %d: %s", url, response.StatusCode, raw)
	}
	if reply == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if strings.Contains(response.Header.Get("Content-Type"), "text/event-stream") {
		scanner := bufio.NewScanner(bytes.NewReader(raw))
		for scanner.Scan() {
			if line := scanner.Text(); strings.HasPrefix(line, "data:") {
				return json.Unmarshal([]byte(strings.TrimSpace(line[5:])), reply)
			}
		}
		return errors.New("an event stream without data")
	}
	return json.Unmarshal(raw, reply)
}

type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

var rpcID = 0

// mcp calls one JSON-RPC method of the unit's MCP endpoint.
func mcp(method string, params any, result any) error {
	rpcID++
	var reply rpcReply
	body := map[string]any{"jsonrpc": "2.0", "id": rpcID, "method": method, "params": params}
	if err := post(os.Getenv("DAC_MCP_URL"), body, &reply); err != nil {
		return err
	}
	if reply.Error != nil {
		return errors.New(reply.Error.Message)
	}
	return json.Unmarshal(reply.Result, result)
}

type tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

type toolResult struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

type toolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type completion struct {
	Choices []struct {
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

func run() error {
	question, err := os.ReadFile(os.Getenv("DAC_QUESTION_FILE"))
	if err != nil {
		return err
	}
	instructions, err := os.ReadFile(os.Getenv("DAC_SYSTEM_PROMPT_FILE"))
	if err != nil {
		return err
	}
	init := map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "dac-go-agent", "version": "1.0.0"},
	}
	var ignored map[string]any
	if err := mcp("initialize", init, &ignored); err != nil {
		return err
	}
	var listed struct {
		Tools []tool `json:"tools"`
	}
	if err := mcp("tools/list", map[string]any{}, &listed); err != nil {
		return err
	}
	offered := []map[string]any{}
	for _, t := range listed.Tools {
		function := map[string]any{"name": t.Name, "description": t.Description, "parameters": t.InputSchema}
		offered = append(offered, map[string]any{"type": "function", "function": function})
	}
	messages := []message{{"role": "system", "content": string(instructions)}, {"role": "user", "content": string(question)}}
	steps, _ := strconv.Atoi(os.Getenv("DAC_MAX_STEPS"))
	for step := 0; step < steps; step++ {
		var reply completion
		body := map[string]any{"model": os.Getenv("DAC_MODEL"), "messages": messages, "tools": offered}
		if err := post(os.Getenv("DAC_MODEL_BASE_URL")+"/chat/completions", body, &reply); err != nil {
			return err
		}
		if len(reply.Choices) == 0 {
			return errors.New("a reply without choices")
		}
		said := reply.Choices[0].Message
		assistant := message{"role": "assistant", "content": said.Content}
		if len(said.ToolCalls) > 0 {
			assistant["tool_calls"] = said.ToolCalls
		}
		messages = append(messages, assistant)
		if len(said.ToolCalls) == 0 { // text is the answer
			if said.Content != nil {
				fmt.Println(*said.Content)
			}
			return nil
		}
		for _, call := range said.ToolCalls {
			arguments := map[string]any{}
			_ = json.Unmarshal([]byte(call.Function.Arguments), &arguments)
			var result toolResult
			params := map[string]any{"name": call.Function.Name, "arguments": arguments}
			if err := mcp("tools/call", params, &result); err != nil {
				return err
			}
			texts := []string{}
			for _, part := range result.Content {
				texts = append(texts, part.Text)
			}
			messages = append(messages, message{"role": "tool", "tool_call_id": call.ID, "content": strings.Join(texts, "\n")})
			if call.Function.Name == "answer" && !result.IsError {
				return nil
			}
		}
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "go agent:", err)
		os.Exit(1)
	}
}
