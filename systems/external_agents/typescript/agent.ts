// A tool-calling agent in TypeScript: the task's tools from the suite's MCP server (the MCP TypeScript SDK),
// the model through the suite's metered gateway (the `openai` client at an OpenAI-compatible base URL).
// Nothing here knows the suite: it reads what the suite sets in its environment (docs/bring-your-own-agent.md).
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import OpenAI from "openai";

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the suite sets it for every unit)`);
  return value;
}

async function main(): Promise<void> {
  const token = required("DAC_TOKEN");
  const question = readFileSync(required("DAC_QUESTION_FILE"), "utf-8");
  const instructions = readFileSync(required("DAC_SYSTEM_PROMPT_FILE"), "utf-8");
  const maxSteps = Number(process.env.DAC_MAX_STEPS ?? "12");

  const mcp = new Client({ name: "dac-typescript-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(required("DAC_MCP_URL")), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await mcp.connect(transport);
  const { tools } = await mcp.listTools();
  const offered = tools.map((tool) => ({
    type: "function" as const,
    function: { name: tool.name, description: tool.description ?? "", parameters: tool.inputSchema as Record<string, unknown> },
  }));

  // maxRetries 0: the gateway's provider retries; a budget's HTTP 402 must stop the agent.
  const model = new OpenAI({ baseURL: required("DAC_MODEL_BASE_URL"), apiKey: token, maxRetries: 0 });
  const messages: Message[] = [
    { role: "system", content: instructions },
    { role: "user", content: question },
  ];
  for (let step = 0; step < maxSteps; step++) {
    const reply = await model.chat.completions.create({ model: required("DAC_MODEL"), messages, tools: offered });
    const message = reply.choices[0].message;
    messages.push(message);
    const calls = message.tool_calls ?? [];
    if (calls.length === 0) {
      console.log(message.content ?? ""); // its text is the answer when it called no tool
      break;
    }
    let answered = false;
    for (const call of calls) {
      if (call.type !== "function") continue;
      const result = await mcp.callTool({ name: call.function.name, arguments: JSON.parse(call.function.arguments || "{}") });
      const content = result.content as Array<{ type: string; text?: string }>;
      const text = content.map((part) => part.text ?? "").join("\n");
      messages.push({ role: "tool", tool_call_id: call.id, content: text });
      answered ||= call.function.name === "answer" && !result.isError;
    }
    if (answered) break;
  }
  await mcp.close();
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
});
