"""A simulated many-node cluster on one machine: hundreds of short real runs, one PostgreSQL.

    python benchmarks/cluster_scale.py --nodes 8 --runs 200 [--steps 2] [--no-bare]
        [--register 1000,5000] [--probe-every 15] [--fresh-cluster] [--submit-first]
        [--both-orders]

What it starts (and stops, to the last process): a private PostgreSQL (tests.support.pgtemp) and
``--nodes`` Ray nodes with ``ray start`` (``--cpus-per-node`` CPUs and one *fake* GPU each --
Ray schedules GPUs it is told about, torch finds no CUDA and trains on the CPU -- plus a
``node_i`` resource), so trials request ``{CPU: 1, GPU: 1}`` as they would on a GPU cluster.
The sweep: ``--runs`` runs of the ``tiny`` preset, ``--steps`` steps each, every point logged.

What it measures, in this order (``--submit-first`` swaps 1 and 2; ``--fresh-cluster`` gives
each its own new cluster: on a shared one the second phase inherits the first one's dead
workers, whose log files every node's log monitor keeps polling):
1. bare Ray Tune on the same cluster: the same RunSpecs through ``trainer.train`` with an
   in-memory reporter, same concurrency, actors reused (the floor: no DB, no claims);
2. the real ``orchestrator submit FILE --address ... --db postgresql+psycopg://...``, while a
   monitor samples every second the driver's RSS and the server's connections
   (results_db.read.pgstat: per process, by application_name), and every ``--probe-every`` s times
   ``orchestrator status``, ``orchestrator leaderboard`` and the dashboard's Overview (AppTest,
   a cold render, in a fresh process);
3. integrity: every run's (metric, step) points against the bare run's count (lost, duplicated);
4. register time (plan + ``submit.register`` + ``jobs_for``, no Ray) for ``--register`` sizes.
``--both-orders`` does 1-3 twice, bare Tune first and then the submit first (each submit into a
DB of its own), and prints the ratio of each side's mean wall: on this machine whichever phase
runs second is faster, so one order alone moves the ratio by up to +-0.1.
Prints one table (with date, machine and load); the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import pickle
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VARIANTS = {"baseline": "{}", "g1": "{gate.position: G1}",
            "g1_head": "{gate.position: G1, gate.granularity: headwise}",
            "g2": "{gate.position: G2}", "g3": "{gate.position: G3}"}
SWEEP = """name: {name}
base:
  model: {{preset: tiny}}
  train: {{steps: {steps}, batch_size: 2, seq_len: 16, warmup: 0, eval_every: 0,
          eval_batches: 1, log_every: 1, checkpoint_every: 0}}
variants:
{variants}
seeds: {seeds}
resources: {{cpus: 1, gpus: 1}}
retries: 0
"""


def sweep_text(name: str, runs: int, steps: int) -> str:
    """``runs`` runs: the 5 variants x ceil(runs / 5) seeds (a multiple of 5 is exact)."""
    seeds = list(range(-(-runs // len(VARIANTS))))
    variants = "\n".join(f"  {k}: {v}" for k, v in VARIANTS.items())
    return SWEEP.format(name=name, steps=steps, variants=variants, seeds=seeds)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.update(DS_ACCELERATOR="cpu", RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
             PYTHONPATH=str(ROOT), TUNE_DISABLE_STRICT_METRIC_CHECKING="1")
    e.pop("RAY_ADDRESS", None)
    return e


# --- the cluster -------------------------------------------------------------------------
@dataclass
class Cluster:
    address: str  # 127.0.0.1:PORT of the GCS; "" until the head is up
    temp_dir: str
    ports: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # worker port blocks


def start_cluster(nodes: int, cpus: int) -> Cluster:
    """A head and ``nodes - 1`` worker nodes of ``cpus`` CPUs, each with a ``node_<i>`` resource
    (tests.cluster_fixtures.start_node: fresh ports, restarted if Ray's start-up window passes)."""
    from tests.cluster_fixtures import start_node

    tmp = tempfile.mkdtemp(prefix="gssc", dir="/tmp")
    common = ["--num-cpus", str(cpus), "--num-gpus", "1", "--temp-dir", tmp,
              "--disable-usage-stats"]
    cluster = Cluster("", tmp)
    try:
        port = start_node(["--include-dashboard", "false", "--resources", '{"node_0": 1}',
                           *common], cluster.ports, head_dir=tmp)
        cluster.address = f"127.0.0.1:{port}"
        for i in range(1, nodes):
            start_node(["--address", cluster.address, "--resources", f'{{"node_{i}": 1}}',
                        *common], cluster.ports)
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def worker_log_bytes(cluster: Cluster) -> int:
    """Bytes the cluster's worker processes have written to their stdout/stderr logs (Ray's
    log monitor reads every one of them)."""
    return sum(f.stat().st_size for f in Path(cluster.temp_dir).glob("session_*/logs/worker-*")
               if f.is_file())


def stop_cluster(cluster: Cluster) -> None:
    import shutil

    from tests.cluster_fixtures import stop_processes

    port = cluster.address.rsplit(":", 1)[1] if cluster.address else "0"
    stop_processes(cluster.temp_dir, int(port))
    cluster.ports.close()
    shutil.rmtree(cluster.temp_dir, ignore_errors=True)


# --- bare Ray Tune (a subprocess: its own driver, as submit has) ------------------------------
def bare_main(address: str, sweep_file: str, storage: str, concurrent: int) -> None:
    """The floor: the same RunSpecs through trainer.train with a MemoryReporter, no DB."""
    import json

    import ray
    from ray import tune

    from orchestrator.run.env import driver_defaults, worker_env_vars
    from orchestrator.sweep.plan import make_plan

    driver_defaults()
    # each spec pickled on its own, as the scheduler's PackedJobs: a trial unpickles only its
    specs = {r.name: pickle.dumps(r.spec) for r in make_plan(sweep_file).runs}
    ray.init(address=address, runtime_env={"env_vars": worker_env_vars()},
             log_to_driver=False)

    def trial(config: dict[str, Any], specs: dict[str, Any]) -> None:
        from contract.reporter import MemoryReporter
        from orchestrator.run.env import prepare_trial_env

        prepare_trial_env()
        from trainer.train import train

        t0 = time.time()
        rep = MemoryReporter()
        ckpt = Path(storage) / "bare" / config["name"]
        res = train(pickle.loads(specs[config["name"]]), rep, ckpt)
        tune.report({"status": res.status, "points": len({(s, k) for s, k, _ in _pts(rep)}),
                     "t0": t0, "t1": time.time()})

    t0 = time.perf_counter()
    grid = tune.Tuner(
        tune.with_resources(tune.with_parameters(trial, specs=specs), {"CPU": 1, "GPU": 1}),
        param_space={"name": tune.grid_search(list(specs))},
        tune_config=tune.TuneConfig(max_concurrent_trials=concurrent, reuse_actors=True),
        run_config=tune.RunConfig(name="bare", storage_path=storage, verbose=0),
    ).fit()
    fit_s = time.perf_counter() - t0
    points = {r.config["name"]: int((r.metrics or {}).get("points", -1)) for r in grid}
    ok = sum((r.metrics or {}).get("status") == "succeeded" for r in grid)
    ts = [(r.metrics or {}) for r in grid]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print("BARE " + json.dumps({
        "fit_s": fit_s, "succeeded": ok, "points": points,
        "first_start_wall": min(m.get("t0", math.inf) for m in ts),
        "last_end_wall": max(m.get("t1", 0.0) for m in ts),
        "driver_cpu_s": usage.ru_utime + usage.ru_stime}))
    ray.shutdown()


def _pts(rep: Any) -> list[tuple[int, str, float]]:
    """MemoryReporter's points as (step, name, value)."""
    return [(int(s), str(k), float(v)) for s, k, v in rep.points]


# --- where the CPU goes, by kind of process (both phases) -------------------------------
def _kind(cmd: list[str], driver: int, pid: int) -> str:
    line = " ".join(cmd)
    if pid == driver:
        return "driver"
    if "postgres" in (cmd[0] if cmd else ""):
        return "PostgreSQL"
    for key, kind in (("raylet", "raylets"), ("gcs_server", "GCS"), ("ray::", "trial workers"),
                      ("default_worker.py", "trial workers")):
        if key in line:
            return kind
    if "ray" in line:  # Ray's agents and monitors: python .../ray/<path>.py
        script = next((Path(c).stem for c in cmd if c.endswith(".py")), Path(cmd[0]).name)
        return f"Ray: {script}"
    return f"other ({Path(cmd[0]).name if cmd else 'kernel'})"


class CpuByKind:
    """CPU seconds used during a phase, summed by kind of process (psutil, sampled every
    second: a process's last sample counts, one that started during the phase from zero)."""

    def __init__(self, driver: int) -> None:
        import psutil

        self.driver, self._stop = driver, threading.Event()
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        for p in psutil.process_iter(["cmdline", "cpu_times"]):
            if p.info["cpu_times"] is not None:
                self.first[p.pid] = p.info["cpu_times"].user + p.info["cpu_times"].system
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _sample(self) -> None:
        import psutil

        for p in psutil.process_iter(["cmdline", "cpu_times"]):
            ct = p.info["cpu_times"]
            if ct is not None and p.pid != os.getpid():
                # a worker starts as a fork of its raylet and exits with an empty cmdline:
                # the newest kind read from a non-empty cmdline counts
                cmd = p.info["cmdline"] or []
                kind = _kind(cmd, self.driver, p.pid) if cmd or p.pid not in self.last \
                    else self.last[p.pid][0]
                self.last[p.pid] = (kind, ct.user + ct.system)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self._sample()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._t.join()
        self._sample()
        out: dict[str, float] = {}
        for pid, (kind, cpu) in self.last.items():
            out[kind] = out.get(kind, 0.0) + cpu - self.first.get(pid, 0.0)
        return out

    def started(self, kind: str) -> int:
        """Processes of ``kind`` that started during the phase (a trial worker's imports --
        torch, DeepSpeed -- cost seconds of CPU: reused actors keep this near the
        concurrency)."""
        return sum(k == kind for pid, (k, _) in self.last.items() if pid not in self.first)


# --- the monitor during submit -----------------------------------------------------------------
@dataclass
class Samples:
    rss_mb: list[float] = field(default_factory=list)
    conns_total: list[int] = field(default_factory=list)
    conns_trials: list[int] = field(default_factory=list)
    conns_driver: list[int] = field(default_factory=list)
    per_trial_max: int = 0
    trial_procs_max: int = 0
    first_metric_s: float | None = None
    status_s: list[float] = field(default_factory=list)
    status_query_s: list[float] = field(default_factory=list)  # its DB reads, in-process
    leaderboard_s: list[float] = field(default_factory=list)
    overview_s: list[float] = field(default_factory=list)
    probe_errors: list[str] = field(default_factory=list)


def monitor(pid: int, url: str, sweep: str, samples: Samples, stop: threading.Event,
            t0: float, probe_every: float) -> None:
    import psutil

    import results_db
    from results_db.read.pgstat import connections

    proc = psutil.Process(pid)
    probes: set[int] = set()
    if probe_every > 0:
        threading.Thread(target=_probe_loop, args=(url, sweep, samples, stop, probe_every,
                                                   probes), daemon=True).start()
    reader = None
    while not stop.wait(1.0):
        try:
            samples.rss_mb.append(proc.memory_info().rss / 2**20)
            c = connections(url)
        except Exception:  # noqa: BLE001 - the driver ended between two samples
            continue
        mine = {os.getpid(), *probes}
        trials = {p: n for p, n in c.by_pid.items() if p != pid and p not in mine}
        samples.conns_total.append(c.total)
        samples.conns_driver.append(c.by_pid.get(pid, 0))
        samples.conns_trials.append(sum(trials.values()))
        samples.per_trial_max = max([samples.per_trial_max, *trials.values()])
        samples.trial_procs_max = max(samples.trial_procs_max, len(trials))
        if samples.first_metric_s is None:
            try:
                reader = reader or results_db.open(url, readonly=True)
                if reader.row_counts().get("metrics", 0) > 0:
                    samples.first_metric_s = time.perf_counter() - t0
            except Exception:  # noqa: BLE001 - the schema may not exist yet
                reader = None
    if reader is not None:
        reader.close()


def _probe_loop(url: str, sweep: str, samples: Samples, stop: threading.Event, every: float,
                probes: set[int]) -> None:
    cmds = [("status", samples.status_s, [sys.executable, "-m", "orchestrator", "status",
                                          "--db", url]),
            ("leaderboard", samples.leaderboard_s, [sys.executable, "-m", "orchestrator",
                                                    "leaderboard", sweep, "--db", url]),
            ("overview", samples.overview_s, [sys.executable, __file__, "--overview", url])]
    import results_db

    reader = None
    while not stop.wait(every):
        try:  # what `status` asks the DB, without a process start and imports
            reader = reader or results_db.open(url, readonly=True)
            t = time.perf_counter()
            reader.sweep_status(sweep), reader.live_runs(sweep)
            samples.status_query_s.append(time.perf_counter() - t)
        except Exception as exc:  # noqa: BLE001 - no schema yet
            samples.probe_errors.append(f"status query: {exc}")
        for what, into, cmd in cmds:
            t = time.perf_counter()
            p = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, cwd=ROOT)
            probes.add(p.pid)
            out, _ = p.communicate(timeout=300)
            wall = time.perf_counter() - t
            if what == "overview" and p.returncode == 0:
                wall = float(out.strip().splitlines()[-1])  # the render, not the import
            if p.returncode not in (0, 1, 2) or (what != "leaderboard" and p.returncode):
                samples.probe_errors.append(f"{what} rc={p.returncode}: {out[-300:]}")
            into.append(wall)


def overview_main(url: str) -> None:
    """One cold render of the dashboard's Overview (AppTest); prints its seconds."""
    from streamlit.testing.v1 import AppTest

    os.environ["GATESWEEP_DB"] = url
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    at.query_params["page"] = "Overview"
    at.run()  # imports and first render; then a cold render (caches cleared) is timed
    import streamlit as st

    st.cache_data.clear()
    t = time.perf_counter()
    at.run()
    wall = time.perf_counter() - t
    if at.exception:
        raise SystemExit(f"overview: {[e.value for e in at.exception]}")
    print(f"{wall:.3f}")


# --- the measurement ----------------------------------------------------------------------------
def run_bare(cluster: Cluster, sweep_file: Path, storage: Path, nodes: int) -> dict[str, Any]:
    import json

    t, t_wall = time.perf_counter(), time.time()
    proc = subprocess.Popen([sys.executable, __file__, "--bare", cluster.address,
                             str(sweep_file), str(storage), str(nodes)], env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    cpu, logs = CpuByKind(proc.pid), worker_log_bytes(cluster)
    stdout, stderr = proc.communicate(timeout=7200)
    wall = time.perf_counter() - t
    by_kind = cpu.stop()
    by_kind["worker log bytes (not CPU)"] = (worker_log_bytes(cluster) - logs) / 1e3
    line = next((ln for ln in stdout.splitlines() if ln.startswith("BARE ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"bare Tune failed:\n{stdout[-3000:]}\n{stderr[-3000:]}")
    got = json.loads(line[5:])
    return {**got, "wall_s": wall, "cpu_by_kind": by_kind,
            "workers_started": cpu.started("trial workers"),
            "first_start_s": got["first_start_wall"] - t_wall,
            "last_end_s": got["last_end_wall"] - t_wall}


def run_submit(cluster: Cluster, sweep_file: Path, sweep: str, storage: Path, url: str,
               probe_every: float) -> tuple[dict[str, Any], Samples]:
    import psutil

    samples, stop = Samples(), threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "submit", str(sweep_file),
                             "--address", cluster.address, "--db", url, "--storage",
                             str(storage)], env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    mon = threading.Thread(target=monitor, args=(proc.pid, url, sweep, samples, stop, t0,
                                                 probe_every), daemon=True)
    mon.start()
    by_kind, logs = CpuByKind(proc.pid), worker_log_bytes(cluster)
    ps = psutil.Process(proc.pid)
    cpu = 0.0
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        try:
            ct = ps.cpu_times()
            cpu = ct.user + ct.system
        except psutil.Error:
            pass
    rc = proc.wait()
    wall = time.perf_counter() - t0
    cpu_by_kind = by_kind.stop()
    cpu_by_kind["worker log bytes (not CPU)"] = (worker_log_bytes(cluster) - logs) / 1e3
    stop.set()
    mon.join(60)
    if os.environ.get("GATESWEEP_SCALE_LOG"):  # the driver's whole output, for diagnosis
        Path(os.environ["GATESWEEP_SCALE_LOG"]).write_text("".join(lines))
    return {"rc": rc, "wall_s": wall, "cpu_s": cpu, "tail": "".join(lines[-15:]),
            "cpu_by_kind": cpu_by_kind, "workers_started": by_kind.started("trial workers"),
            "t0_wall": time.time() - wall}, samples


def timeline(url: str, sweep: str, t0_wall: float) -> dict[str, float]:
    """Seconds after submit started: first attempt started, last attempt ended; and the
    median attempt length (claim to end: what a trial spends inside gatesweep's code)."""
    import statistics

    import results_db

    with results_db.open(url, readonly=True) as db:
        ids = db.runs(sweep=sweep, with_config=False, columns=["id"])["id"].to_list()
        atts = [a for i in ids for a in db.attempts(i)]
    starts = [a.started.timestamp() for a in atts if a.started]
    ends = [a.ended.timestamp() for a in atts if a.ended]
    lengths = [a.ended.timestamp() - a.started.timestamp() for a in atts
               if a.started and a.ended]
    if not starts or not ends:
        return {}
    return {"first_start_s": min(starts) - t0_wall, "last_end_s": max(ends) - t0_wall,
            "attempt_median_s": statistics.median(lengths)}


def integrity(url: str, sweep: str, expected: dict[str, int]) -> dict[str, int]:
    """Rows lost / duplicated against each run's point count in the bare run."""
    import results_db

    with results_db.open(url, readonly=True) as db:
        runs = db.runs(sweep=sweep, with_config=False, columns=["id", "name", "status"])
        pts = db.metrics(runs["id"].to_list())
    rows = pts.height
    distinct = pts.select(["run_id", "name", "step"]).unique().height
    got = dict(pts.group_by("run_id").len().iter_rows())
    # a run that did not succeed has no complete set to check (its rerun re-logs every step)
    lost = sum(max(0, expected.get(n, 0) - got.get(i, 0))
               for i, n, st in runs.select(["id", "name", "status"]).iter_rows()
               if st == "succeeded")
    return {"runs": runs.height, "succeeded": int((runs["status"] == "succeeded").sum()),
            "metric_rows": rows, "expected_rows": sum(expected.values()), "lost": lost,
            "duplicated": rows - distinct}


def register_times(url_of: Any, sizes: list[int], steps: int, tmp: Path) -> list[tuple]:
    """(runs, plan s, register s, jobs_for s) into a fresh DB each, no Ray."""
    import results_db
    from orchestrator.run.driver.submit import jobs_for, register
    from orchestrator.sweep.plan import make_plan

    out = []
    for n in sizes:
        f = tmp / f"reg{n}.yaml"
        f.write_text(sweep_text(f"reg{n}", n, steps))
        t = time.perf_counter()
        plan = make_plan(f)
        t_plan = time.perf_counter() - t
        db = results_db.open(url_of(f"reg{n}"))
        t = time.perf_counter()
        res = register(db, plan, force=False)
        t_reg = time.perf_counter() - t
        t = time.perf_counter()
        jobs_for(res.to_run, plan, tmp / "storage", db.url.render_as_string(False))
        t_jobs = time.perf_counter() - t
        db.close()
        out.append((len(plan.runs), t_plan, t_reg, t_jobs))
    return out


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--cpus-per-node", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--no-bare", action="store_true", help="skip the bare Ray Tune baseline")
    ap.add_argument("--register", default="1000,5000", help="register-time sizes ('' skips)")
    ap.add_argument("--probe-every", type=float, default=15.0,
                    help="seconds between status/leaderboard/Overview probes; 0: none (their "
                         "CPU is not the sweep's, so a ratio run is taken without them)")
    ap.add_argument("--fresh-cluster", action="store_true",
                    help="a new Ray cluster for each phase: the second phase otherwise "
                         "inherits the first one's dead workers (their log files, which Ray's "
                         "log monitors keep polling, and their GCS records)")
    ap.add_argument("--submit-first", action="store_true",
                    help="run the submit before bare Tune (to see the order's effect)")
    ap.add_argument("--both-orders", action="store_true",
                    help="two rounds, bare Tune first then the submit first (the submit into "
                         "a second DB), and the ratio of the order-balanced means")
    a = ap.parse_args()
    from tests.support.pgtemp import start_pg_server, stop_pg_server

    cpu = platform.processor() or platform.machine()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')} {platform.node()} {cpu}, "
          f"{os.cpu_count()} CPUs; load {load()}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="gs-scale-"))
    pg = start_pg_server()
    try:
        orders = [False, True] if a.both_orders else [a.submit_first]
        rounds = []
        for i, submit_first in enumerate(orders):
            bare, sub, s, integ = one_round(a, pg, tmp / f"round{i}", f"scale{i}", submit_first)
            sizes = [int(x) for x in a.register.split(",") if x.strip()] if i == 0 else []
            for n in sizes:
                pg.admin(f"CREATE DATABASE reg{n}")
            reg = register_times(pg.url, sizes, a.steps, tmp)
            report(a, bare, sub, s, integ, reg, submit_first)
            rounds.append((bare, sub))
        if len(rounds) == 2 and all(b for b, _ in rounds):
            both(rounds)
    finally:
        stop_pg_server(pg)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def one_round(a: Any, pg: Any, tmp: Path, db: str, submit_first: bool
              ) -> tuple[dict[str, Any] | None, dict[str, Any], Samples, dict[str, Any]]:
    """Bare Tune and the submit (first when ``submit_first``), the submit into DB ``db``."""
    tmp.mkdir(parents=True)
    pg.admin(f"CREATE DATABASE {db}")
    url = pg.url(db)
    sweep = f"scale{a.runs}"
    sweep_file = tmp / f"{sweep}.yaml"
    sweep_file.write_text(sweep_text(sweep, a.runs, a.steps))
    cluster: Cluster | None = None
    try:
        def phase(fresh: bool) -> Cluster:
            nonlocal cluster
            if cluster is not None and not fresh:
                return cluster
            if cluster is not None:
                stop_cluster(cluster)
            t = time.perf_counter()
            cluster = start_cluster(a.nodes, a.cpus_per_node)
            print(f"{a.nodes} Ray nodes up in {time.perf_counter() - t:.0f} s; load {load()}",
                  flush=True)
            return cluster

        def the_bare() -> dict[str, Any] | None:
            if a.no_bare:
                return None
            got = run_bare(phase(a.fresh_cluster), sweep_file, tmp / "bare", a.nodes)
            print(f"bare Tune: {got['wall_s']:.1f} s wall (fit {got['fit_s']:.1f} s), "
                  f"{got['succeeded']} succeeded; load {load()}", flush=True)
            return got

        def the_submit() -> tuple[dict[str, Any], Samples]:
            got = run_submit(phase(a.fresh_cluster), sweep_file, sweep, tmp / "storage", url,
                             a.probe_every)
            print(got[0]["tail"], flush=True)
            return got

        if submit_first:
            sub, s = the_submit()
            bare = the_bare()
        else:
            bare = the_bare()
            sub, s = the_submit()
    finally:
        if cluster is not None:
            stop_cluster(cluster)
    expected = bare["points"] if bare else {}
    integ = integrity(url, sweep, expected)
    integ.update(timeline(url, sweep, sub["t0_wall"]))
    return bare, sub, s, integ


def both(rounds: list[tuple[Any, Any]]) -> None:
    """The order-balanced figures: each side's mean wall over its first and second places
    (whichever phase runs second is faster on this machine; the mean cancels that)."""
    bare = [b["wall_s"] for b, _ in rounds]
    sub = [u["wall_s"] for _, u in rounds]
    mb, ms = sum(bare) / 2, sum(sub) / 2
    print(f"\nboth orders: bare Tune {bare[0]:.1f} (first) / {bare[1]:.1f} (second) s, "
          f"submit {sub[0]:.1f} (second) / {sub[1]:.1f} (first) s; means {mb:.1f} / {ms:.1f} s; "
          f"ratio of the means {ms / mb:.2f}x (per order: {sub[0] / bare[0]:.2f}x, "
          f"{sub[1] / bare[1]:.2f}x)")


def _stat(xs: list[float]) -> str:
    if not xs:
        return "not sampled"
    xs = sorted(xs)
    return f"median {xs[len(xs) // 2]:.2f} s, max {xs[-1]:.2f} s (n={len(xs)})"


def report(a: Any, bare: dict | None, sub: dict, s: Samples, integ: dict, reg: list,
           submit_first: bool) -> None:
    n = a.runs
    order = "submit, then bare" if submit_first else "bare, then submit"
    rows = [("nodes x CPUs (+1 fake GPU each)", f"{a.nodes} x {a.cpus_per_node}"),
            ("phases", f"{order}; {'a new' if a.fresh_cluster else 'the same'} cluster "
                       "for each"),
            ("runs x steps", f"{integ['runs']} x {a.steps}"),
            ("submit exit code / succeeded", f"{sub['rc']} / {integ['succeeded']}"),
            ("submit wall", f"{sub['wall_s']:.1f} s = {sub['wall_s'] / n:.3f} s per run, "
                            f"{60 * n / sub['wall_s']:.1f} runs/min")]
    if bare:
        rows += [("bare Ray Tune wall", f"{bare['wall_s']:.1f} s = {bare['wall_s'] / n:.3f} s "
                                        f"per run ({bare['succeeded']} succeeded)"),
                 ("per-trial ratio submit / bare", f"{sub['wall_s'] / bare['wall_s']:.2f}x")]
    rows += [("driver CPU", f"{sub['cpu_s']:.1f} s = {1000 * sub['cpu_s'] / n:.0f} ms per run"),
             ("driver peak RSS", f"{max(s.rss_mb, default=0):.0f} MiB"),
             ("first metric visible", "never" if s.first_metric_s is None
              else f"{s.first_metric_s:.1f} s after submit started"),
             ("first attempt start / last attempt end",
              f"{integ.get('first_start_s', -1):.1f} / {integ.get('last_end_s', -1):.1f} s "
              "after submit started"),
             ("bare: driver CPU; first trial start / last end",
              "not run" if not bare else
              f"{bare['driver_cpu_s']:.1f} s = {1000 * bare['driver_cpu_s'] / n:.0f} ms per "
              f"run; {bare['first_start_s']:.1f} / {bare['last_end_s']:.1f} s after start"),
             ("trial worker processes started: bare / submit",
              f"{bare['workers_started'] if bare else '-'} / {sub['workers_started']}"),
             ("median attempt (claim to end)", f"{integ.get('attempt_median_s', -1):.2f} s"),
             ("peak PG connections (all)", str(max(s.conns_total, default=0))),
             ("peak: driver / all trials / one trial",
              f"{max(s.conns_driver, default=0)} / {max(s.conns_trials, default=0)} / "
              f"{s.per_trial_max} (<= {s.trial_procs_max} trial processes at once)"),
             ("metric rows (expected)", f"{integ['metric_rows']} ({integ['expected_rows']})"),
             ("rows lost (succeeded runs) / duplicated",
              f"{integ['lost']} / {integ['duplicated']}"),
             ("`status` during the sweep (process)", _stat(s.status_s)),
             ("  its DB reads (sweep_status + live_runs)", _stat(s.status_query_s)),
             ("`leaderboard` during the sweep", _stat(s.leaderboard_s)),
             ("dashboard Overview (cold render, after imports)", _stat(s.overview_s))]
    rows += [(f"register {r[0]} runs: plan / register / jobs_for",
              f"{r[1]:.2f} / {r[2]:.2f} / {r[3]:.2f} s") for r in reg]
    w = max(len(k) for k, _ in rows)
    print(f"\n{time.strftime('%Y-%m-%d %H:%M %Z')}, load {load()}")
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    logs = "worker log bytes (not CPU)"  # stored / 1e3: the column shows bytes per run
    kinds = sorted((set(sub["cpu_by_kind"]) | set(bare["cpu_by_kind"] if bare else ())) - {logs})
    print(f"\nCPU by kind of process, ms per run{'':<12}{'bare':>8}{'submit':>8}{'extra':>8}")
    for k in [*kinds, "all", logs]:
        def total(d: dict[str, float]) -> float:
            return sum(v for key, v in d.items() if key != logs) if k == "all" else d.get(k, 0.0)
        b = total(bare["cpu_by_kind"]) if bare else 0.0
        u = total(sub["cpu_by_kind"])
        print(f"  {k:<42}{1e3 * b / n:>8.1f}{1e3 * u / n:>8.1f}{1e3 * (u - b) / n:>8.1f}")
    for e in s.probe_errors[:3]:
        print("probe error:", e)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        bare_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--overview":
        overview_main(sys.argv[2])
    else:
        main()
