"""The unit's MCP tools over stdio, for agents that start their MCP servers themselves as child processes.

    python3 mcp_stdio.py UNIT_FILE          (UNIT_FILE: {"url": ..., "token": ...})

An external agent (systems/external.py) finds this command in `DAC_MCP_STDIO` (a shell-quoted command line;
`{mcp_stdio}` in a command template) and configures it as a stdio MCP server. It forwards every JSON-RPC
message it reads on stdin (one per line) to the unit's Streamable HTTP endpoint with the unit's token, and
writes the server's replies to stdout: the same tools, schemas, budgets and refusals as over HTTP, each tool
call the same tool step of the unit's trace. Its address and token come from a file (stdio clients pass their
child a filtered environment, and a token on a command line is visible to other processes).

It uses the standard library only: in an agent's sandbox the suite's own package and its libraries are not
there, and the file is copied in beside the unit's file (systems/agent_sandbox.py).
"""

import json
import sys
import threading
import urllib.error
import urllib.request

PROTOCOL_HEADER = "mcp-protocol-version"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy of the environment


class Forwarder:
    """Posts each message to the unit's endpoint; replies are written whole, one per line, in any order."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.protocol: str | None = None  # the version the server chose at initialize, sent on later requests
        self.write_lock = threading.Lock()

    def post(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self.write({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            return
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.protocol:
            headers[PROTOCOL_HEADER] = self.protocol
        request = urllib.request.Request(self.url, data=line.encode(), headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=None) as response:
                body = response.read().decode("utf-8", errors="replace")
                kind = response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as refused:
            detail = refused.read().decode("utf-8", errors="replace")[:500]
            self.fail(message, f"the unit's MCP endpoint answered HTTP {refused.code}: {detail}")
            return
        except OSError as failed:
            self.fail(message, f"the unit's MCP endpoint cannot be reached: {failed}")
            return
        for reply in _replies(body, kind):
            self.note_protocol(reply)
            self.write(reply)

    def note_protocol(self, reply: object) -> None:
        result = reply.get("result") if isinstance(reply, dict) else None
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self.protocol = result["protocolVersion"]

    def fail(self, message: object, why: str) -> None:
        if isinstance(message, dict) and "id" in message and "method" in message:  # a request: it gets an answer
            self.write({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": why}})

    def write(self, reply: object) -> None:
        with self.write_lock:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def _replies(body: str, kind: str) -> list[object]:
    """The JSON-RPC messages of a reply: a JSON body, or the `data:` events of a server-sent-event stream."""
    if not body.strip():
        return []  # 202 Accepted: a notification or a response of the client's
    if "text/event-stream" in kind:
        events = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
        return [json.loads(event) for event in events if event]
    parsed = json.loads(body)
    return parsed if isinstance(parsed, list) else [parsed]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: mcp_stdio.py UNIT_FILE (a JSON file with the unit's url and token)")
    with open(sys.argv[1], encoding="utf-8") as file:
        unit = json.load(file)
    forwarder = Forwarder(unit["url"], unit["token"])
    pending = []
    for line in sys.stdin:
        if line.strip():
            worker = threading.Thread(target=forwarder.post, args=(line.strip(),), daemon=True)
            worker.start()
            pending.append(worker)
    for worker in pending:
        worker.join()


if __name__ == "__main__":
    main()
