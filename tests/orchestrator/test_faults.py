"""Retry classification (orchestrator/run/health/faults.py): fast, no Ray needed for the rules."""

from __future__ import annotations

import pytest

from orchestrator.run.health.faults import Fault, RetryPolicy, classify, describe, should_retry


class NodeDiedError(Exception):  # the same class *name* as ray.exceptions.NodeDiedError
    pass


class Preempted(Exception):  # the same class *name* as trainer.Preempted
    pass


def _wrapped(inner: BaseException) -> RuntimeError:
    try:
        try:
            raise inner
        except BaseException as e:
            raise RuntimeError("Training failed after 1 attempt") from e
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(("exc", "text", "fault"), [
    (MemoryError(), "", Fault.OOM),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "", Fault.OOM),
    (NodeDiedError("node abc"), "", Fault.NODE_LOST),
    (RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:1234"), "", Fault.WORKER_DIED),
    (RuntimeError("injected failure at step 25"), "", Fault.CODE_ERROR),  # a test's fault
    (ValueError("data.path 'x.txt': no such file"), "", Fault.CODE_ERROR),
    (KeyError("model"), "", Fault.CODE_ERROR),
    (KeyboardInterrupt(), "", Fault.CANCELLED),
    (Preempted("SIGTERM at step 40; checkpoint step_00000040"), "", Fault.PREEMPTED),
    (None, "worker exited: received SIGTERM", Fault.PREEMPTED),
    (None, "ray.exceptions.ActorDiedError: The actor died unexpectedly", Fault.WORKER_DIED),
    (None, "the trial process exited without reporting (killed or crashed)",
     Fault.WORKER_DIED),
    (None, "Traceback ...\nZeroDivisionError: division by zero", Fault.CODE_ERROR),
])
def test_classify(exc: BaseException | None, text: str, fault: Fault) -> None:
    assert classify(exc, text) is fault


def test_classify_follows_the_cause_chain() -> None:
    assert classify(_wrapped(NodeDiedError("n1"))) is Fault.NODE_LOST
    assert classify(_wrapped(MemoryError())) is Fault.OOM
    assert classify(_wrapped(ValueError("bad"))) is Fault.CODE_ERROR


def test_torch_oom_type_is_recognised() -> None:
    torch = pytest.importorskip("torch")
    assert classify(torch.OutOfMemoryError("x")) is Fault.OOM


def test_ray_error_types_are_recognised() -> None:
    exc = pytest.importorskip("ray.exceptions")
    assert classify(exc.NodeDiedError("node n died")) is Fault.NODE_LOST
    assert classify(exc.WorkerCrashedError()) is Fault.WORKER_DIED


def test_policy_matrix() -> None:
    strict, lenient = RetryPolicy(2), RetryPolicy(2, retry_code_errors=True)
    for f in (Fault.OOM, Fault.WORKER_DIED, Fault.NODE_LOST, Fault.PREEMPTED):
        assert strict.should_retry(f) and lenient.should_retry(f), f
    for f in (Fault.DIVERGED, Fault.CANCELLED):
        assert not strict.should_retry(f) and not lenient.should_retry(f), f
    assert not strict.should_retry(Fault.CODE_ERROR)
    assert lenient.should_retry(Fault.CODE_ERROR)


def test_policy_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATESWEEP_RETRY_CODE_ERRORS", "1")
    assert should_retry(ValueError("bug"))
    monkeypatch.setenv("GATESWEEP_RETRY_CODE_ERRORS", "0")
    assert not should_retry(ValueError("bug"))
    monkeypatch.setenv("GATESWEEP_RETRY_CODE_ERRORS", "maybe")
    with pytest.raises(ValueError, match="GATESWEEP_RETRY_CODE_ERRORS"):
        RetryPolicy.from_env(1)
    with pytest.raises(ValueError, match="retries"):
        RetryPolicy(-1)


def test_describe() -> None:
    assert describe(Fault.OOM, True) == " [oom; retried]"
    assert describe(Fault.CODE_ERROR, False) == " [code_error; not retried]"


def test_the_vocabulary_is_the_db_columns() -> None:
    """One owner: orchestrator.run.health.faults.Fault *is* contract.states.FaultClass (the values
    the attempts.fault column holds); preempted and silent deaths are worth another attempt."""
    from contract.states import FaultClass

    assert Fault is FaultClass
    policy = RetryPolicy(retries=1)
    assert policy.should_retry(Fault.PREEMPTED) and policy.should_retry(Fault.NO_HEARTBEAT)
    assert not policy.should_retry(Fault.SUPERSEDED)
