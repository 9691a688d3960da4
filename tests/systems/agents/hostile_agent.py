"""A hostile external agent (standard library only): it tries what issue 35 found an agent could do on the host,
and prints what it reached as JSON on its standard output (its answer). The test that runs it asserts that every
attempt failed. `python hostile_agent.py MODE` with MODE probe, forkbomb, memory or disk; what to try comes from
HOSTILE_* variables (paths and ports known to the test, as an attacker could find them on a real machine)."""

import json
import os
import socket
import sys
import time


def attempts(variable):
    return [item for item in os.environ.get(variable, "").split(os.pathsep) if item]


def read(path):
    try:
        if os.path.isdir(path):
            return "listed: " + ",".join(sorted(os.listdir(path))[:20])
        with open(path, "rb") as file:
            return "read: " + file.read(200).decode("utf-8", "replace")
    except OSError as refused:
        return f"refused: {refused.strerror}"


def write(path):
    try:
        with open(path, "w") as file:
            file.write("SABOTAGED")
        return "written"
    except OSError as refused:
        return f"refused: {refused.strerror}"


def connect(port):
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=2).close()
        return "connected"
    except OSError as refused:
        return f"refused: {refused.strerror or refused}"


def secrets(pid):
    """The keys and tokens in a process's environment, as an attacker would harvest them."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            entries = file.read().decode("utf-8", "replace").split("\0")
    except OSError as refused:
        return f"refused: {refused.strerror}"
    return [entry for entry in entries if "KEY=" in entry or "TOKEN=" in entry]


def processes():
    seen = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            seen[name] = {"cmdline": read(f"/proc/{name}/cmdline"), "secrets": secrets(name)}
    return seen


def outlive(marker):
    """A child that forks twice and calls setsid, then waits to rewrite the run's results after the unit."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sh", ["sh", "-c", f"sleep {marker}; echo SABOTAGED > {os.environ.get('HOSTILE_RESULTS')}"])
        os._exit(0)
    os.wait()


def probe():
    report = {
        "uid": os.getuid(),
        "env": dict(os.environ),
        "processes": processes(),
        "reads": {path: read(path) for path in attempts("HOSTILE_READ")},
        "writes": {path: write(path) for path in attempts("HOSTILE_WRITE")},
        "ports": {port: connect(port) for port in attempts("HOSTILE_PORTS")},
    }
    try:
        os.kill(int(os.environ.get("HOSTILE_KILL", "0")) or 1, 9)
        report["kill"] = "sent"
    except OSError as refused:
        report["kill"] = f"refused: {refused.strerror}"
    if os.environ.get("HOSTILE_MARKER"):
        outlive(os.environ["HOSTILE_MARKER"])
    print(json.dumps(report))


def forkbomb():
    children = 0
    try:
        while children < 100_000:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            children += 1
    except OSError as refused:
        print(json.dumps({"children": children, "stopped": refused.strerror}))
        return
    print(json.dumps({"children": children, "stopped": None}))


def memory():
    held = bytearray(2 << 30)  # 2 GB, every page touched (zero-filled)
    print(json.dumps({"allocated": len(held)}))


def disk():
    written = 0
    block = b"x" * (1 << 20)
    try:
        with open(os.path.join(os.environ.get("HOME", "/tmp"), "fill"), "wb") as file:
            while written < (64 << 30):
                file.write(block)
                file.flush()
                written += len(block)
    except OSError as refused:
        print(json.dumps({"written": written, "stopped": refused.strerror}))
        return
    print(json.dumps({"written": written, "stopped": None}))


if __name__ == "__main__":
    {"probe": probe, "forkbomb": forkbomb, "memory": memory, "disk": disk}[sys.argv[1]]()
