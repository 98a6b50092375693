"""The Ray cluster of one sweep: a private local one, started and stopped by the driver, or
an existing one the driver connects to (``--address`` / ``RAY_ADDRESS``).

Its own temp folder and dashboard port keep it apart from other Ray instances on the
machine; the dashboard is needed because Ray Train releases a stopped trial's placement
group through Ray's state API (``RAY_API_SERVER_ADDRESS`` points it at this cluster). A
local cluster starts only the processes a sweep uses (:func:`_only_what_a_sweep_uses`); an
existing cluster keeps its own. A
sweep starting a local cluster first removes the temp folders its user's dead sweeps left
(:mod:`.ray_temp`).

Ray's own lines never reach the console: the workers' output stays in Ray's session logs
(``log_to_driver=False``), and what Ray tells the driver about the cluster (``(raylet) A
worker died ...``, in colour) goes, without colour codes, to the sweep's ``ray.log`` and the
``ludwig_hpo.ray`` logger (:func:`rays_messages_to`). The console says what matters in the
product's own lines (a lost worker's rank, node and signal: :mod:`.worker_loss`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.errors import DataError, ResourceError
from ludwig_hpo.execution.ray_temp import make_temp_dir, remove_dead_temp_dirs
from ludwig_hpo.execution.resources import NodeShape, ResourcePlan, nodes_from_ray, plan_resources

#: Environment of the cluster's processes. The short health-check interval makes Ray Train
#: notice finished workers within 0.2 s rather than its default 2 s, which every fresh
#: trial's teardown would otherwise wait for. Each
#: fresh Train job also skips what a local sweep does not use: the preemption watcher (no
#: preemptible nodes) and the structured JSON logs of controller and workers (errors reach
#: MLflow through Tune's error files).
RAY_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_TRAIN_ENABLE_CONTROLLER_STRUCTURED_LOGGING": "0",
    "RAY_TRAIN_ENABLE_WORKER_STRUCTURED_LOGGING": "0",
    "RAY_AIR_NEW_OUTPUT": "0",
    "RAY_DEDUP_LOGS": "0",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "PYTHONWARNINGS": "ignore::DeprecationWarning",
    # Ctrl-C reaches the sweep as KeyboardInterrupt (Tune's own handler would end the search
    # quietly and let the k-fold phase start).
    "TUNE_DISABLE_SIGINT_HANDLER": "1",
}


#: What ``ray.init`` writes into the driver's environment and ``ray.shutdown`` leaves there
#: (its breakpoint hook, its usage-stats choice): put back as they were when the cluster stops.
RAY_SETS_ON_INIT = ("PYTHONBREAKPOINT", "RAY_USAGE_STATS_ENABLED")


#: Files that exist on a Linux machine with an NVIDIA or AMD GPU driver loaded (``/dev/dxg``:
#: WSL 2's GPU bridge): without any of them torch sees no GPU, so it need not be imported to
#: count none.
GPU_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def may_have_gpus() -> bool:
    """Whether this machine may have a GPU torch can use: False on Linux without a GPU
    driver's files (:data:`GPU_DRIVER_FILES`) and on macOS (no CUDA), else True."""
    if sys.platform == "darwin":
        return False
    if sys.platform.startswith("linux"):
        return any(os.path.exists(p) for p in GPU_DRIVER_FILES)
    return True


def local_resources() -> tuple[int, int]:
    """(CPUs, GPUs) of this machine for a local cluster. Imports torch only where a GPU
    driver is present (:func:`may_have_gpus`): ``hpo validate`` and the driver of a CPU
    sweep stay free of it."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if not may_have_gpus():
        return cpus, 0
    try:
        import torch

        gpus = torch.cuda.device_count()
    except Exception:  # a broken CUDA install must not stop a CPU sweep
        gpus = 0
    return cpus, gpus


def local_plan(cfg: SweepConfig, sweep_file: Path | None = None) -> ResourcePlan:
    """The resource plan of ``cfg`` on a local cluster of this machine (``sweep_file``: where
    a GPU asked for by ``hyperopt.executor.gpu_resources_per_trial`` is pointed at).

    Raises:
        ResourceError: ``use_gpu: true`` without a GPU, or a trial that cannot fit.
    """
    cpus, gpus = local_resources()
    return cluster_plan(cfg, [NodeShape(cpus, gpus)], existing=False, sweep_file=sweep_file)


def _gpu_key_source(cfg: SweepConfig, sweep_file: Path | None) -> tuple[str, str | None, str]:
    """(key, file:line:column or None, fix) of the key that asked for a GPU: Ludwig's
    ``hyperopt.executor.gpu_resources_per_trial`` when the file has it (it sets use_gpu),
    else ``backend.use_gpu``. Reads ``sweep_file`` for the position only."""
    if not cfg.hyperopt.executor.gpu_resources_per_trial:
        return "backend.use_gpu", None, "set use_gpu: auto or false"
    from ludwig_hpo.config.reader import mark_for, read_sweep_file

    path = ("hyperopt", "executor", "gpu_resources_per_trial")
    source = None
    if sweep_file is not None:
        with contextlib.suppress(Exception):  # only the position is lost
            mark = mark_for(read_sweep_file(sweep_file).marks, path)
            source = f"{sweep_file}:{mark[0]}:{mark[1]}" if mark else str(sweep_file)
    return ".".join(path), source, "set gpu_resources_per_trial: 0 to train on CPU, or run on a machine with a GPU"


def cluster_plan(
    cfg: SweepConfig, nodes: list[NodeShape], *, existing: bool, sweep_file: Path | None = None
) -> ResourcePlan:
    """The resource plan of ``cfg`` on a cluster of ``nodes`` (``existing``: one the sweep
    connects to rather than starts). Pure but for reading ``sweep_file`` to locate an error.

    Raises:
        ResourceError: ``use_gpu: true`` without a GPU, or a trial that cannot fit.
    """
    b = cfg.backend
    gpus = sum(n.gpus for n in nodes)
    use_gpu = gpus > 0 if b.use_gpu == "auto" else bool(b.use_gpu)
    if not use_gpu and getattr(cfg, "quantization", None) is not None:  # bitsandbytes loads on CUDA only
        raise ResourceError(
            f"quantization loads the base model with bitsandbytes, which needs a CUDA GPU, but "
            f"{'the cluster has' if existing else 'this machine has'} none",
            source=str(sweep_file) if sweep_file is not None else None,
            key="quantization",
            fix="remove quantization, or run on a machine or cluster with a GPU",
        )
    if use_gpu and not gpus:
        key, source, fix = _gpu_key_source(cfg, sweep_file)
        asked = "asks for a GPU" if key != "backend.use_gpu" else "is true"
        raise ResourceError(
            f"{key.rsplit('.', 1)[-1]} {asked} but {'the cluster has' if existing else 'this machine has'} no GPU",
            source=source,
            key=key,
            fix=fix,
        )
    return plan_resources(
        num_workers=b.num_workers,
        use_gpu=use_gpu,
        cpus_per_worker=b.cpus_per_worker,
        gpus_per_worker=b.gpus_per_worker,
        nodes=nodes,
        existing_cluster=existing,
        max_concurrent=cfg.hyperopt.executor.max_concurrent_trials,
        num_samples=cfg.hyperopt.num_trials,
    )


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def scoped_env(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) environment variables; restore them on exit."""
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _quiet_tune_logs() -> None:
    # Trial errors reach the console and MLflow as one line (tracebacks go to MLflow's
    # error.txt); Tune's own logging of them would be a wall of text.
    for name in ("ray.tune", "ray.train"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: A file Ray's messages go to, or a callable naming it at each message (None: none).
LogFile = Path | Callable[[], Path | None] | None
#: The logger that receives what Ray tells the driver (one record per line, colour removed).
RAY_LOGGER = "ludwig_hpo.ray"


@contextlib.contextmanager
def rays_messages_to(log_file: LogFile) -> Iterator[None]:
    """While in this context, the messages Ray's driver would print about the cluster (a
    raylet's ``A worker died ...``, autoscaler notes; worker output is off already) go,
    without colour codes and one per line as ``<time> (<source>) <text>``, to ``log_file``
    (appended; None: none; a callable: the file it returns at each message, e.g. the
    sweep's ``ray.log`` once its output folder exists) and to the :data:`RAY_LOGGER` logger
    at INFO, instead of the console. Driver only; changes nothing on the cluster."""
    from ray._private import worker

    original = getattr(worker, "print_to_stdstream", None)
    if original is None:  # another Ray layout: its lines print as Ray prints them
        yield
        return
    logger = logging.getLogger(RAY_LOGGER)
    lock = threading.Lock()

    def to_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        source = str(data.get("actor_name") or data.get("task_name") or data.get("pid") or "ray")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        lines = [" ".join(_ANSI.sub("", str(ln)).split()) for ln in data.get("lines") or []]
        lines = [ln for ln in lines if ln]
        for ln in lines:
            logger.info("(%s) %s", source, ln)
        path = log_file() if callable(log_file) else log_file
        if path is not None and lines:
            try:
                with lock, open(path, "a", encoding="utf-8") as f:
                    f.writelines(f"{stamp} ({source}) {ln}\n" for ln in lines)
            except OSError:  # the output folder went away: the logger still has them
                pass

    setattr(worker, "print_to_stdstream", to_log)  # noqa: B010 (Ray's own name, replaced for a while)
    try:
        yield
    finally:
        setattr(worker, "print_to_stdstream", original)  # noqa: B010


@contextlib.contextmanager
def ray_data_off_the_console() -> Iterator[None]:
    """While in this context, Ray Data's messages in this process stay off the console (its log
    file in the cluster's session folder still gets them): its progress lines always, and its
    warnings and errors when the context ends in a :class:`~ludwig_hpo.errors.DataError`, the
    one line that names the file of a failed read
    (:func:`~ludwig_hpo.data.streaming.sources.read_error`) and that Ray Data's traceback of the
    read would only bury. Any other ending prints its warnings and errors as Ray Data would
    have, after the fact. Driver only (the driver fits a streamed dataset in it).
    """
    import logging.handlers

    import ray.data  # noqa: F401 (its import configures the "ray.data" logger and its console handler)

    logger = logging.getLogger("ray.data")
    consoles = [
        h for h in logger.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]
    levels = [h.level for h in consoles]
    held = logging.handlers.BufferingHandler(capacity=sys.maxsize)  # flushes only when told to
    held.setLevel(logging.WARNING)
    for h in consoles:
        h.setLevel(logging.CRITICAL + 1)
    logger.addHandler(held)
    failed_read = False
    try:
        yield
    except DataError:
        failed_read = True
        raise
    finally:
        logger.removeHandler(held)
        for h, level in zip(consoles, levels, strict=True):
            h.setLevel(level)
        if not failed_read:
            for record in held.buffer:
                for h in consoles:
                    if record.levelno >= h.level:
                        h.handle(record)


@contextlib.contextmanager
def no_callback_usage_tag() -> Iterator[None]:
    """While in this context, Ray Tune records no usage tag of a run's callbacks. Counting
    them imports Ray's logger integrations, and MLflow's imports MLflow (~100 MB, ~1 s) into
    the driver, which otherwise holds none while trials run (the store has a process of its
    own). Driver only; with another Ray layout (the name missing) nothing changes."""
    from ray.air._internal import usage

    original = getattr(usage, "tag_callbacks", None)
    if original is None:
        yield
        return
    setattr(usage, "tag_callbacks", lambda callbacks: False)  # noqa: B010 (Ray's own name, replaced for a while)
    try:
        yield
    finally:
        setattr(usage, "tag_callbacks", original)  # noqa: B010


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast when nothing listens at a ``host:port`` address (``ray.init`` would retry
    for a minute); other forms (``auto``, ``ray://``) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ResourceError(
            f"cannot connect to the Ray cluster at {address!r} ({e.strerror or e})",
            key="--address",
            fix="pass the address printed by 'ray start --head' (host:port), or unset "
            "RAY_ADDRESS to start a local cluster",
        ) from None


@contextlib.contextmanager
def existing_cluster(address: str) -> Iterator[list[NodeShape]]:
    """Connect to a running Ray cluster at ``address`` (``host:port`` of its GCS, or
    ``auto``); yield its alive nodes; disconnect on exit (the cluster keeps running). Driver only.

    The cluster's nodes must have this package and its dependencies installed, and
    ``--output`` should be on storage every node can reach when trials run on other machines.

    Raises:
        ResourceError: nothing answers at ``address``.
    """
    import ray

    _check_reachable(address)
    env: dict[str, str | None] = {k: v for k, v in RAY_ENV.items() if k not in os.environ}
    env.update({k: os.environ.get(k) for k in RAY_SETS_ON_INIT})
    _quiet_tune_logs()
    with scoped_env(env), rays_messages_to(None):
        on_term = signal.getsignal(signal.SIGTERM)
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                logging_level=logging.ERROR,
                configure_logging=True,
                runtime_env={
                    "env_vars": {
                        k: v for k, v in RAY_ENV.items() if k.startswith(("RAY_TRAIN", "RAY_DEDUP", "RAY_AIR"))
                    }
                },
            )
        except (ConnectionError, RuntimeError, ValueError) as e:
            first = (str(e).splitlines() or [""])[0]
            raise ResourceError(
                f"cannot connect to the Ray cluster at {address!r} ({first})",
                key="--address",
                fix="pass the address printed by 'ray start --head' (host:port), or unset "
                "RAY_ADDRESS to start a local cluster",
            ) from None
        if callable(on_term) and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_term)
        try:
            yield nodes_from_ray(ray.nodes())
        finally:
            ray.shutdown()


@contextlib.contextmanager
def _daemons_in_their_own_session() -> Iterator[None]:
    """While in this context, the processes Ray starts for a local cluster (GCS, raylet,
    dashboard; the raylet's workers and agents follow) start in a session of their own. Driver only.

    A signal sent to the driver's process group (``timeout``, ``kill -TERM -<pgid>``, a
    terminal's Ctrl-C) then reaches the driver alone, which stops the sweep and the cluster in
    order. Otherwise the raylet can die first, and Ray's core worker in the driver ends the
    process (exit code 1) when it finds the object store gone, before the sweep has marked its
    runs. The daemons still die with the driver: Ray sets their parent-death signal (Linux).
    Without that kernel support (macOS) Ray starts a reaper that kills the driver's process
    group when the driver dies, so the daemons stay in that group there.
    """
    from ray._private import services, utils

    popen: Any = getattr(services, "ConsolePopen", None)
    fate_sharing = getattr(utils, "detect_fate_sharing_support", None)
    if popen is None or fate_sharing is None or not sys.platform.startswith("linux") or not fate_sharing():
        yield  # another Ray layout, or the reaper's process group holds the daemons
        return

    class _NewSessionPopen(popen):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("start_new_session", True)
            super().__init__(*args, **kwargs)

    setattr(services, "ConsolePopen", _NewSessionPopen)  # noqa: B010 (Ray's own name, replaced for a while)
    try:
        yield
    finally:
        setattr(services, "ConsolePopen", popen)  # noqa: B010


#: The dashboard modules a local cluster loads: the state API, through which Ray Train's
#: placement-group cleaner asks whether a stopped trial's controller is still alive. The
#: other modules (jobs, metrics, events, serve, data, train and node views, reports) each
#: run in a process of their own and serve Ray's web UI, which a sweep does not use: its UI
#: is MLflow's (``hpo ui``).
DASHBOARD_MODULES = ("StateHead",)


@contextlib.contextmanager
def _only_what_a_sweep_uses(*, dashboard: bool) -> Iterator[None]:
    """While in this context, a local cluster that ``ray.init`` starts leaves out the
    processes a sweep does not use. Driver only; an existing cluster is never started here.

    - with ``dashboard``, the dashboard loads :data:`DASHBOARD_MODULES` only (the state API
      stays); without it, no dashboard process starts at all. Ray started without its
      dashboard (``include_dashboard=False``) would still run one (~115 MB RSS) that serves
      no HTTP and holds the usage-stats module alone; no part of Ray Tune, Train (without
      Train jobs) or Data that a sweep uses reads it, and its URL reads empty, as Ray has it
      for a dashboard that serves nothing;
    - no autoscaler monitor: a local cluster has a fixed set of nodes, nothing to scale;
    - no log monitor: it streams the workers' output to drivers, and the sweep's driver
      asks for none (``log_to_driver=False``); the log files stay in the session folder,
      where lost workers are diagnosed from (:mod:`.worker_loss`).

    With another Ray layout (the names patched here missing) the cluster starts as Ray's
    defaults have it.
    """
    from ray._private import node, parameter, ray_constants, services

    start: Any = getattr(services, "start_ray_process", None)
    params: Any = getattr(parameter, "RayParams", None)
    dashboard_type = getattr(ray_constants, "PROCESS_TYPE_DASHBOARD", None)
    node_class: Any = getattr(node, "Node", None)
    start_api_server: Any = getattr(node_class, "start_api_server", None)
    if start is None or params is None or dashboard_type is None or start_api_server is None:
        yield
        return

    def start_process(command: list[str], process_type: str, *args: Any, **kwargs: Any) -> Any:
        if process_type == dashboard_type and not any(c.startswith("--modules-to-load") for c in command):
            command = [*command, f"--modules-to-load={','.join(DASHBOARD_MODULES)}"]
        return start(command, process_type, *args, **kwargs)

    def no_api_server(self: Any, *args: Any, **kwargs: Any) -> None:
        self._webui_url = ""
        self.get_gcs_client().internal_kv_put(b"webui:url", b"", True, ray_constants.KV_NAMESPACE_DASHBOARD)

    class _Params(params):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("no_monitor", True)
            kwargs.setdefault("include_log_monitor", False)
            super().__init__(*args, **kwargs)

    setattr(services, "start_ray_process", start_process)  # noqa: B010 (Ray's own names, replaced for a while)
    setattr(parameter, "RayParams", _Params)  # noqa: B010
    if not dashboard:
        setattr(node_class, "start_api_server", no_api_server)  # noqa: B010
    try:
        yield
    finally:
        setattr(services, "start_ray_process", start)  # noqa: B010
        setattr(parameter, "RayParams", params)  # noqa: B010
        setattr(node_class, "start_api_server", start_api_server)  # noqa: B010


@contextlib.contextmanager
def local_cluster(
    *, num_cpus: float, num_gpus: int, trial_slots: int, log_file: LogFile = None, train_jobs: bool = True
) -> Iterator[None]:
    """Start a local Ray cluster with ``trial_slots`` units of the ``trial_slot`` resource;
    stop it and remove its temp folder on exit. Driver only.

    The temp folders of this user's earlier sweeps that died without removing theirs go
    first (:func:`~ludwig_hpo.execution.ray_temp.remove_dead_temp_dirs`).

    Args:
        num_cpus, num_gpus: logical resources of the cluster (whole numbers).
        trial_slots: how many trials may run at once (each reserves one slot).
        log_file: where what Ray tells the driver goes (:func:`rays_messages_to`), e.g. the
            sweep's ``ray.log`` (or a callable returning it); None: the :data:`RAY_LOGGER`
            logger only.
        train_jobs: whether trials run as Ray Train jobs (the ``fresh`` executor's
            multi-worker trials), whose stopped trials' placement groups Ray Train releases
            through the dashboard's state API. False (warm worker groups, one-process
            trials): the cluster starts without a dashboard process.

    Raises:
        ValueError: ``num_cpus`` is not a whole number.
    """
    import ray

    if not float(num_cpus).is_integer():
        raise ValueError(f"a local cluster has whole CPUs, but got num_cpus={num_cpus}")
    cpus = int(num_cpus)
    port = free_port()
    remove_dead_temp_dirs()
    temp_dir = make_temp_dir()
    env: dict[str, str | None] = {**RAY_ENV, "RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{port}"}
    env = {k: v for k, v in env.items() if k == "RAY_API_SERVER_ADDRESS" or k not in os.environ}
    env["RAY_ADDRESS"] = None  # this cluster is private; an inherited address would redirect ray.init
    env.update({k: os.environ.get(k) for k in RAY_SETS_ON_INIT})
    _quiet_tune_logs()
    with scoped_env(env), rays_messages_to(log_file):
        try:
            on_term = signal.getsignal(signal.SIGTERM)
            with _daemons_in_their_own_session(), _only_what_a_sweep_uses(dashboard=train_jobs):
                ray.init(
                    num_cpus=cpus,
                    num_gpus=num_gpus,
                    resources={"trial_slot": trial_slots},
                    include_dashboard=train_jobs,
                    dashboard_host="127.0.0.1",
                    dashboard_port=port,
                    _temp_dir=temp_dir,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                    configure_logging=True,
                )
            if callable(on_term) and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, on_term)  # the caller's handler, not Ray's abort
            yield
        finally:
            ray.shutdown()
            shutil.rmtree(temp_dir, ignore_errors=True)
