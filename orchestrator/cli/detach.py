"""``submit --detach``, the client side: submit the sweep as a Ray Job on the cluster.

(Moved out of orchestrator/cli/jobs.py, which keeps the job's entrypoint ``job_main``: the
entrypoint runs the CLI, and the CLI calls this module, so one module holding both made an
import cycle cli <-> jobs.)

The job's entrypoint is the same ``orchestrator submit FILE --db URL --storage DIR`` command,
executed by the cluster's job supervisor (inside the job ``RAY_ADDRESS`` points at the
cluster, so the driver joins it instead of starting a local one). The sweep file travels in
the job's ``working_dir``; the DB URL and the storage path must mean the same thing on the
head node as here: an absolute path on a shared file system, or PostgreSQL. ``status`` and the
dashboard read the DB, so they keep working from anywhere; ``ray job logs -f ID`` shows the
driver's output.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract import env
from contract.child import python_command
from contract.errors import UserError
from orchestrator.run.cluster import resolve_address, validate_storage
from orchestrator.run.env import driver_defaults, worker_env_vars

JOB_PYTHON_ENV = "GATESWEEP_JOB_PYTHON"  # the interpreter on the cluster (default: python)


@dataclass(frozen=True)
class DetachedJob:
    job_id: str
    address: str
    entrypoint: str


def job_client(address: str | None) -> Any:
    """A JobSubmissionClient for ``address`` (GCS host:port, ray://, or http://dashboard)."""
    from ray.job_submission import JobSubmissionClient


    driver_defaults()
    target = require_address(address)
    try:
        return JobSubmissionClient(target)
    except Exception as exc:  # noqa: BLE001 - connection problems become one sentence
        raise UserError(f"--address {target}: cannot reach the Ray Jobs API ({exc}); the head "
                        "node needs its dashboard (ray start --head --include-dashboard true)"
                        ) from None


def require_address(address: str | None) -> str:
    target = resolve_address(address)
    if not target:
        raise UserError("--detach needs a Ray cluster: give --address HOST:PORT (or "
                        "http://HEAD:8265) or set RAY_ADDRESS")
    return target


def entrypoint(file_name: str, db_url: str, storage: str, max_concurrent: int | None,
               force: bool, python: str) -> str:
    """The command the cluster runs (paths quoted; the sweep file is in the working dir)."""
    args = python_command("orchestrator.cli.jobs", file_name, "--db", db_url, "--storage", storage,
                          python=python)
    if max_concurrent:
        args += ["--max-concurrent", str(max_concurrent)]
    if force:
        args.append("--force")
    return " ".join(shlex.quote(a) for a in args)


def check_db_url(db_url: str) -> str:
    """The job's driver runs on the head node: a relative SQLite path would be another file
    there, and :memory: would vanish. Absolute SQLite paths must be on a shared mount."""
    import results_db

    database = results_db.sqlite_database(db_url)
    if database is not None and database in ("", ":memory:"):
        raise UserError(f"--db {db_url}: a detached sweep needs a database file or server "
                        "that the cluster's head node can reach (PostgreSQL recommended)")
    return results_db.absolute_url(db_url)


def submit_detached(file: str | Path, db_url: str, address: str | None, storage: str | Path,
                    max_concurrent: int | None = None, force: bool = False,
                    client: Any = None) -> DetachedJob:
    """Validate locally, then submit the sweep as a Ray Job; returns at once."""
    from orchestrator.sweep.plan import make_plan

    plan = make_plan(file)  # an invalid file never reaches the cluster
    if client is None:
        require_address(address)  # before anything is created on disk
    url = check_db_url(db_url)
    where = validate_storage(storage)
    client = client or job_client(address)
    python = env.text(JOB_PYTHON_ENV)
    workdir = Path(tempfile.mkdtemp(prefix="gsjob"))
    try:
        shutil.copy(plan.path, workdir / plan.path.name)
        cmd = entrypoint(plan.path.name, url, where, max_concurrent, force, python)
        job_id = client.submit_job(
            entrypoint=cmd, submission_id=_submission_id(plan.spec.name),
            runtime_env={"working_dir": str(workdir), "env_vars": {
                **worker_env_vars(),
                # the job's driver calls ray.init(runtime_env={"env_vars": ...}) again with
                # the same keys: let it combine with the job's instead of refusing
                "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}},
            metadata={"gatesweep_sweep": plan.spec.name, "gatesweep_db": _redact(url)})
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"could not submit the sweep as a Ray Job: {exc}") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # uploaded by submit_job already
    return DetachedJob(job_id, str(address or os.environ.get("RAY_ADDRESS", "")), cmd)


def _submission_id(sweep: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", sweep)[:60]
    return f"gatesweep-{safe}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def _redact(url: str) -> str:
    import results_db

    return results_db.redacted(url)


def follow_hint(job: DetachedJob, db_url: str) -> str:
    """What the user types next (printed by ``submit --detach``)."""
    addr = f" --address {job.address}" if job.address else ""
    return (f"submitted Ray job {job.job_id}; follow it with `ray job logs -f {job.job_id}"
            f"{addr}`, or the results with `orchestrator status --db {_redact(db_url)}`")
