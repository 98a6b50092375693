"""The ``backend`` section: how many workers train each trial, on what, with which strategy;
Ludwig's form of it (``type``, ``trainer``, ``processor``, ``cache_*``, ``loader``) and
Ludwig's per-trial resources (``hyperopt.executor.cpu_resources_per_trial`` /
``gpu_resources_per_trial``) read into it. Typed, frozen; no I/O."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field, model_validator

from ludwig_hpo.config.base import RuleError, _Base

_WHERE = ("backend",)
#: Ludwig's ``backend.trainer`` keys and the flat key each one sets.
_TRAINER_KEYS = {"num_workers": "num_workers", "use_gpu": "use_gpu", "strategy": "strategy"}
_STRATEGIES = ("ddp", "fsdp")


class BackendConfig(_Base):
    """How each trial runs: ``num_workers`` workers (gloo on CPU, NCCL on GPU), one GPU each.

    ``num_workers`` defaults to 1, as Ludwig trains a trial with no ``backend`` (or with
    ``type: local``): one process, so ``trainer.batch_size`` is the global batch. Ludwig's
    ``type: ray`` with ``trainer: {num_workers, use_gpu, strategy, resources_per_worker:
    {CPU, GPU}}`` sets the same fields (the flat keys, and so ``--num-workers``, win over
    ``trainer``'s). ``strategy``: ``ddp`` (every worker holds the whole model; gradients are
    all-reduced) or ``fsdp`` (parameters, gradients and optimizer state sharded across the
    workers). ``processor``, ``cache_dir``, ``cache_credentials`` and ``loader`` tune Ludwig's
    distributed preprocessing and data loading; they are accepted and not needed here (the
    data is prepared once in the driver and every trial reuses it), and they change no model.
    """

    type: Literal["local", "ray"] | None = None
    num_workers: int = Field(default=1, ge=1, le=4096)
    use_gpu: Union[Literal["auto"], bool] = "auto"
    strategy: Literal["ddp", "fsdp"] = "ddp"
    cpus_per_worker: float = Field(default=1.0, gt=0)
    #: ``fresh``: a new Ray Train job per trial; ``pooled``: warm worker groups started once
    #: per sweep; ``auto``: pooled on CPU, fresh on GPU.
    trial_executor: Literal["auto", "fresh", "pooled"] = "auto"
    #: GPUs each worker reserves with ``use_gpu``: 1 (a GPU of its own; trials never share
    #: one) or a fraction (several workers, possibly of different trials, share a GPU).
    gpus_per_worker: float = Field(default=1.0, gt=0, le=1)
    processor: dict[str, Any] | None = None
    cache_dir: str | None = None
    cache_credentials: Union[str, dict[str, Any], None] = None
    loader: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _ludwig_form(cls, data: Any) -> Any:
        return read_ludwig_backend(data)

    @model_validator(mode="after")
    def _local_is_one_process(self) -> BackendConfig:
        if self.type == "local" and self.num_workers > 1:
            raise RuleError(
                f"backend type local trains each trial in one process, but num_workers is {self.num_workers}",
                path=(*_WHERE, "num_workers"),
                fix="use type: ray with trainer: {num_workers: N} for N DDP workers per trial",
            )
        return self


def _strategy(value: Any) -> Any:
    """Ludwig's ``strategy`` (a name or ``{type: ..., <options>}``) as one of ours."""
    name = value.get("type") if isinstance(value, dict) else value
    if name == "deepspeed" or name == "horovod":
        raise RuleError(
            f"backend.trainer.strategy {name!r} is not supported yet",
            path=(*_WHERE, "trainer", "strategy"),
            fix="use strategy: fsdp to shard a large model across the workers, or ddp",
        )
    if isinstance(value, dict) and set(value) - {"type"}:
        extra = sorted(set(value) - {"type"})[0]
        raise RuleError(
            f"strategy option {extra!r} is not supported yet",
            path=(*_WHERE, "trainer", "strategy", extra),
            fix=f"write strategy: {name}",
        )
    return name


def read_ludwig_backend(data: Any) -> Any:
    """A raw ``backend`` mapping with Ludwig's ``trainer`` section lifted into the flat keys.
    Mappings without ``trainer`` pass unchanged (so this can run twice). Pure.

    Raises:
        RuleError: a backend type or trainer option that is not supported yet.
    """
    if not isinstance(data, dict):
        return data
    if data.get("type") in ("deepspeed", "horovod", "dask", "spark"):
        raise RuleError(
            f"backend type {data['type']!r} is not supported yet",
            path=(*_WHERE, "type"),
            fix="use type: ray (trainer.strategy: fsdp shards a large model) or local",
        )
    trainer = data.get("trainer")
    if trainer is None:
        return {k: _strategy(v) if k == "strategy" else v for k, v in data.items()}
    if not isinstance(trainer, dict):
        raise RuleError("backend.trainer must be a mapping", path=(*_WHERE, "trainer"), fix="write trainer: {...}")
    out = {k: v for k, v in data.items() if k != "trainer"}
    for key, value in trainer.items():
        if key in _TRAINER_KEYS:
            out.setdefault(_TRAINER_KEYS[key], _strategy(value) if key == "strategy" else value)
        elif key == "resources_per_worker":
            out.update({k: v for k, v in _per_worker(value).items() if k not in data})
        else:
            raise RuleError(
                f"backend.trainer.{key} is not supported yet",
                path=(*_WHERE, "trainer", key),
                fix="remove it (a trial that fails is retried with hyperopt.executor.max_failures)",
            )
    if "strategy" in out:
        out["strategy"] = _strategy(out["strategy"])
    return out


def _per_worker(resources: Any) -> dict[str, Any]:
    """Ludwig's ``resources_per_worker: {CPU: c, GPU: g}`` as ``cpus_per_worker`` /
    ``gpus_per_worker`` (``GPU: 0`` trains on CPU)."""
    where = (*_WHERE, "trainer", "resources_per_worker")
    if not isinstance(resources, dict):
        raise RuleError("resources_per_worker must be a mapping", path=where, fix="write {CPU: 1, GPU: 1}")
    other = sorted(set(resources) - {"CPU", "GPU"})
    if other:
        raise RuleError(
            f"the custom resource {other[0]!r} per worker is not supported yet",
            path=(*where, other[0]),
            fix="request only CPU and GPU",
        )
    out: dict[str, Any] = {}
    if "CPU" in resources:
        out["cpus_per_worker"] = resources["CPU"]
    if "GPU" in resources:
        gpu = resources["GPU"]
        if gpu == 0:
            out["use_gpu"] = False
        else:
            out["gpus_per_worker"] = gpu
    return out


def apply_trial_resources(data: Any) -> Any:
    """A raw sweep mapping whose ``hyperopt.executor.cpu_resources_per_trial`` /
    ``gpu_resources_per_trial`` (Ludwig: the CPUs and GPUs of one whole trial) are written
    into ``backend`` as per-worker resources: ``cpus_per_worker = cpu / num_workers``;
    ``gpu: 0`` trains on CPU, ``gpu: g`` uses ``g / num_workers`` GPUs per worker. Without
    them the mapping is returned unchanged. Pure; runs before the sweep file is validated.

    Raises:
        RuleError: a resource also set in ``backend`` (set twice), or more GPUs than workers
            (a worker trains on one GPU at most).
    """
    hp = data.get("hyperopt") if isinstance(data, dict) else None
    ex = hp.get("executor") if isinstance(hp, dict) else None
    if not isinstance(ex, dict) or not ({"cpu_resources_per_trial", "gpu_resources_per_trial"} & set(ex)):
        return data
    raw_backend = data.get("backend") or {}
    backend = read_ludwig_backend(raw_backend)
    if not isinstance(backend, dict):
        return data
    workers = backend.get("num_workers", 1)
    if not isinstance(workers, int) or workers < 1:
        return data  # the backend's own validation names the problem
    out = dict(backend)
    cpu, gpu = ex.get("cpu_resources_per_trial"), ex.get("gpu_resources_per_trial")
    ex_where = ("hyperopt", "executor")
    if cpu is not None:
        _not_twice(backend, "cpus_per_worker", (*ex_where, "cpu_resources_per_trial"))
        if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and cpu > 0:
            out["cpus_per_worker"] = cpu / workers
    if gpu is not None and isinstance(gpu, int) and not isinstance(gpu, bool):
        where = (*ex_where, "gpu_resources_per_trial")
        _not_twice(backend, "gpus_per_worker", where)
        if gpu == 0:
            if backend.get("use_gpu") is True:
                raise RuleError(
                    "gpu_resources_per_trial is 0 but backend use_gpu is true",
                    path=where,
                    fix="remove one of them",
                )
            out["use_gpu"] = False
        elif gpu > workers:
            raise RuleError(
                f"gpu_resources_per_trial {gpu} exceeds the trial's {workers} worker(s); a worker trains on one GPU",
                path=where,
                fix=f"set backend: {{type: ray, trainer: {{num_workers: {gpu}}}}} to train each trial on {gpu} GPUs",
            )
        else:
            if backend.get("use_gpu") is False:
                raise RuleError(
                    f"gpu_resources_per_trial is {gpu} but backend use_gpu is false",
                    path=where,
                    fix="remove one of them",
                )
            out["use_gpu"] = True
            out["gpus_per_worker"] = gpu / workers
    return {**data, "backend": out}


def _not_twice(backend: dict[str, Any], key: str, where: tuple[str, ...]) -> None:
    if key in backend:
        raise RuleError(
            f"a trial's resources are set twice: {where[-1]} and the backend's per-worker {key}",
            path=where,
            fix="keep only one of them",
        )


def unused_key_notes(backend: BackendConfig, kubernetes_namespace: str | None) -> list[str]:
    """One ``note:`` line per Ludwig key the file sets that this package accepts and does not
    need (Ludwig's distributed-preprocessing keys, ``hyperopt.executor.kubernetes_namespace``),
    saying why and what to do instead; empty when there is none. Pure; printed by ``hpo
    validate`` and at the start of ``hpo sweep``."""
    notes = []
    data = [k for k in ("processor", "cache_dir", "cache_credentials", "loader") if getattr(backend, k) is not None]
    if data:
        notes.append(
            f"note: backend.{', backend.'.join(data)} {'is' if len(data) == 1 else 'are'} not used: the data is "
            "prepared once, in the driver, and every trial reuses it (remove to silence this line)"
        )
    if kubernetes_namespace is not None:
        notes.append(
            "note: hyperopt.executor.kubernetes_namespace is not used: trial results reach the driver through Ray "
            "and MLflow, never through files synced between pods (on Kubernetes, point --address at the Ray cluster)"
        )
    return notes
