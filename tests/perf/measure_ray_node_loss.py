"""A Ray run that loses a node mid-run, beside the same run without the loss (docs/PERFORMANCE.md, "Ray: a node
lost mid-run"): two Ray nodes of 2 CPUs each in one loopback-only network namespace (the cluster of
tests/app/test_ray_cluster.py, whose helpers this uses), `--concurrency 4`, TASKS quiz tasks × 2 epochs of two
scripted model calls (0.5 s each), and `kill -9` of the second node's raylet once KILL_AT records are written.
Each run gets a fresh cluster. Prints, per run: status, units recorded, duplicates, units retried, attempts lost,
seconds from the manifest's start to its end, exit code and the load.

    .venv/bin/python tests/perf/measure_ray_node_loss.py [--rounds 2] [--tasks 60] [--kill-at 12]

As root (unshare -n). To measure older code, put a copy of it first on PYTHONPATH (the driver and both nodes
take it from the environment).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "app")]
import test_ray_cluster as cluster  # noqa: E402 - the namespace, the nodes and the quiz of the test


def one_run(folder: Path, tasks: int, kill_at: int | None) -> dict[str, object]:
    namespace = cluster.Namespace()
    env = dict(cluster.RAY_ENV, **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}))
    try:
        head = ["start", "--head", f"--port={cluster.HEAD_PORT}", "--num-cpus=2", "--node-ip-address=127.0.0.1"]
        namespace.run(*cluster.ray_cli(*head, "--include-dashboard=false", "--disable-usage-stats"), **env)
        second = ["start", f"--address=127.0.0.1:{cluster.HEAD_PORT}", "--num-cpus=2"]
        namespace.run(*cluster.ray_cli(*second, f"--node-ip-address={cluster.SECOND_NODE_IP}"), **env)
        config, out = cluster.quiz(folder, tasks=tasks, concurrency=4), folder / "run"
        command = namespace.command(*cluster.compare_command("--config", str(config), "--out", str(out)))
        run = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if kill_at:
            cluster.wait_for_records(out, kill_at, run, limit_s=300)
            os.kill(cluster.second_raylet(), signal.SIGKILL)
        _, stderr = run.communicate(timeout=900)
    finally:
        namespace.run(*cluster.ray_cli("stop", "--force"), timeout=60)
        namespace.close()
    return summary(out, run.returncode, stderr)


def summary(out: Path, code: int, stderr: str) -> dict[str, object]:
    manifest = json.loads((out / "manifest.json").read_text())
    records = cluster.records(out)
    keys = [(r["task_id"], r["epoch"]) for r in records]
    started, finished = (datetime.fromisoformat(manifest[key]) for key in ("started_at", "finished_at"))
    described = manifest.get("executor") or {}
    return {
        "status": manifest["status"],
        "recorded": len(records),
        "duplicates": len(keys) - len(set(keys)),
        "retried": sum(bool(r.get("retried_attempts")) for r in records),
        "lost_attempts": described.get("lost_attempts"),
        "run_s": round((finished - started).total_seconds(), 1),
        "exit": code,
        "load": os.getloadavg()[0],
        "said": [line for line in stderr.splitlines() if line.startswith(("ray: ", "error: "))][-3:],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--kill-at", type=int, default=12)
    args = parser.parse_args()
    for round_ in range(1, args.rounds + 1):
        for kill_at in (None, args.kill_at) if round_ % 2 else (args.kill_at, None):  # order rotated
            with tempfile.TemporaryDirectory(prefix="ray-node-loss-") as name:
                found = one_run(Path(name), args.tasks, kill_at)
            what = f"kill at {kill_at} records" if kill_at else "no kill"
            print(json.dumps({"round": round_, "run": what, **found}), flush=True)
            time.sleep(2)


if __name__ == "__main__":
    main()
