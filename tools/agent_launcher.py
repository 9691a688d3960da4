"""The first program of an agent's sandbox: it sets the limits, opens the unit's two ports, hands their listening
sockets to the suite, then becomes the agent (exec).

Run by the sandbox (systems/agent_sandbox.py) as `python -I -S /run/dac/launch.py CONFIG_FD` with the base
interpreter; it imports nothing but the standard library (the suite's own package is not visible in the
sandbox). Its configuration arrives on a file descriptor, not on the command line: the agent's command may
carry its token.
"""

import json
import os
import resource
import socket
import sys


def main() -> None:
    with os.fdopen(int(sys.argv[1]), "rb") as source:
        config = json.loads(source.read())
    for name, value in config["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    channel = socket.socket(fileno=config["channel_fd"])
    listeners = []
    for port in config["ports"]:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        listeners.append(listener)
    socket.send_fds(channel, [b"ready"], [listener.fileno() for listener in listeners])
    for listener in listeners:
        listener.close()
    channel.close()
    os.closerange(3, 1 << 16)  # nothing of the launcher's (bwrap's option files included) reaches the agent
    os.chdir(config["cwd"])
    os.environ["PWD"] = config["cwd"]
    argv = config["argv"]
    try:
        os.execvpe(argv[0], argv, os.environ)
    except OSError as failed:
        print(f"the agent's command cannot start: {argv[0]}: {failed.strerror}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main()
