"""Warm DDP worker groups: the ``pooled`` trial executor.

A fresh Ray Train job per trial spends most of a short trial starting processes (a
controller, N workers importing torch, a gloo rendezvous, the first DDP wrap). Here the
sweep starts one group of ``num_workers`` worker actors per concurrent trial slot, once;
each group forms its ``torch.distributed`` process group once, keeps the prepared data,
and runs successive trials through the same worker entry
(:func:`~ludwig_hpo.execution.worker.run_worker`) as a fresh job.

Processes and what runs where:

- :class:`~ludwig_hpo.execution.pool_worker.PoolWorker` (one Ray actor per rank, reserving
  what a Train worker would: ``cpus_per_worker`` CPUs, one GPU on GPU sweeps) runs the loop
  for each trial.
- :class:`WorkerPools` (one async Ray actor per sweep, no resources) owns the workers, so
  they outlive trial actors; it hands a free group to each trial, relays rank 0's per-epoch
  metrics to the trial, tells the ranks to stop at the next epoch boundary, and rebuilds a
  group whose worker died.
- :func:`run_pooled` runs in the Tune trial actor: it forwards each epoch's metrics to
  ``tune.report`` (so Tune schedulers see every epoch) and asks the group to stop when Tune
  stops the trial.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ludwig_hpo.execution.pool_records import GroupInfo, PoolsInfo, RunRecord, RunResult
from ludwig_hpo.execution.pool_state import PoolGroup, PoolRun
from ludwig_hpo.execution.pool_stream import GroupFeeds
from ludwig_hpo.execution.pool_worker import PENDING_PREFIX, PoolWorker
from ludwig_hpo.execution.spec import TrialSpec
from ludwig_hpo.train.report_keys import PENDING_CHECKPOINT_DIR

#: How often a running trial tells its group it is alive (seconds).
HEARTBEAT_INTERVAL_S = 0.5
#: A trial silent this long is gone (its actor was killed): its group stops at the next
#: epoch boundary.
HEARTBEAT_TIMEOUT_S = 10.0
#: After one rank raised, how long the other ranks get to end too (they usually raise the
#: same error) before the group is rebuilt (a rank left in a collective would wait forever).
RAISE_GRACE_S = 10.0


def _drop_checkpoints(messages: list[dict[str, Any]]) -> None:
    """Remove the checkpoint folders of metrics no trial will hand to Tune."""
    for m in messages:
        if PENDING_CHECKPOINT_DIR in m:
            shutil.rmtree(m[PENDING_CHECKPOINT_DIR], ignore_errors=True)


def _failure(errors: dict[int, BaseException], world_size: int, restarted: bool) -> RunResult:
    """The failed result of a run whose ranks raised ``errors`` (Ray's wrappers, by rank).
    Runs in the pools actor (it may read the dead rank's node, see :mod:`.worker_loss`)."""
    from ray.exceptions import RayTaskError

    from ludwig_hpo.execution.worker_loss import describe_dead_rank, is_dead_actor

    # A dead rank explains the failure: its peers then fail in a collective (gloo's
    # "Connection reset by peer"), which says nothing about why.
    dead = next((r for r, e in sorted(errors.items()) if is_dead_actor(e)), None)
    if dead is not None:
        loss = describe_dead_rank(errors[dead], dead, world_size)
        text = "\n\n".join(f"rank {r}: {e}" for r, e in sorted(errors.items()))
        return RunResult("failed", error=loss.describe(), traceback=text, group_restarted=restarted, loss=loss)
    # A raising rank's own error explains more than a peer's lost connection.
    first = next((e for e in errors.values() if isinstance(e, RayTaskError)), next(iter(errors.values())))
    cause = getattr(first, "cause", None) if isinstance(first, RayTaskError) else None
    head = f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(first).__name__}: {first}"
    return RunResult("failed", error=head, traceback=str(first), group_restarted=restarted)


class WorkerPools:
    """The sweep's warm worker groups; an async Ray actor (``num_cpus=0``) started by the driver.

    Args:
        groups: how many groups (= trial slots = trials at once).
        num_workers: DDP world size of each group.
        cpus_per_worker: logical CPUs each worker reserves.
        use_gpu: one GPU per worker.
        data: a one-element list holding the prepared data's ``ObjectRef``, or a streamed
            dataset's ``StreamedData`` (:mod:`.pool_stream`).
    """

    def __init__(self, groups: int, num_workers: int, cpus_per_worker: float, use_gpu: bool, data: list[Any]) -> None:
        self.groups = [PoolGroup(i) for i in range(groups)]
        self.num_workers, self.cpus_per_worker, self.use_gpu = num_workers, cpus_per_worker, use_gpu
        self.data = data
        self.feeds = GroupFeeds(data, num_workers, groups * num_workers * cpus_per_worker)  # streamed splits
        self.runs: dict[str, PoolRun] = {}
        self.history: list[RunRecord] = []
        self._free: asyncio.Condition | None = None
        self._building: dict[int, asyncio.Future[None]] = {}

    def _cond(self) -> asyncio.Condition:
        if self._free is None:  # created on the actor's event loop
            self._free = asyncio.Condition()
        return self._free

    # ------------------------------------------------------------------ groups
    async def _build(self, g: PoolGroup) -> None:
        import ray

        cls = ray.remote(PoolWorker).options(
            num_cpus=self.cpus_per_worker, num_gpus=1 if self.use_gpu else 0, max_restarts=0, max_concurrency=1
        )
        # Ray's stubs type actor methods as plain callables; the handles are used untyped.
        workers: list[Any] = [cls.remote(self.data[0], self.use_gpu) for _ in range(self.num_workers)]
        try:
            addrs = await self._all([w.address.remote() for w in workers])
            _, master_ip, port, _ = addrs[0]
            nodes = [a[0] for a in addrs]  # local world size: the ranks sharing a node
            await self._all(
                [w.setup.remote(r, len(workers), master_ip, port, nodes.count(nodes[r])) for r, w in enumerate(workers)]
            )
        except BaseException:
            for w in workers:
                ray.kill(w)
            g.failed_starts += 1
            raise
        g.workers, g.pids, g.builds = workers, [a[3] for a in addrs], g.builds + 1

    async def _all(self, refs: list[Any]) -> list[Any]:
        """Every rank's answer to one start-up call, in rank order.

        Raises:
            WorkerLostError: a rank's process died during start-up (which rank, where, how).
            Exception: the first rank's error otherwise.
        """
        from ludwig_hpo.errors import WorkerLostError
        from ludwig_hpo.execution.worker_loss import describe_dead_rank, is_dead_actor

        answers = await asyncio.gather(*refs, return_exceptions=True)
        errors = {r: a for r, a in enumerate(answers) if isinstance(a, BaseException)}
        dead = next((r for r, e in errors.items() if is_dead_actor(e)), None)
        if dead is not None:
            loop = asyncio.get_running_loop()
            describe = functools.partial(describe_dead_rank, during="start-up")
            loss = await loop.run_in_executor(None, describe, errors[dead], dead, len(refs))
            raise WorkerLostError(loss) from errors[dead]
        if errors:
            raise next(iter(errors.values()))
        return answers

    async def _ensure_built(self, g: PoolGroup) -> None:
        if g.workers is not None:
            return
        task = self._building.get(g.slot)
        if task is None or task.done():
            task = self._building[g.slot] = asyncio.ensure_future(self._build(g))
        await task

    def _discard(self, g: PoolGroup) -> None:
        import ray

        for w in g.workers or []:
            ray.kill(w, no_restart=True)
        g.workers, g.pids = None, []

    async def warm(self) -> int:
        """Start every group now (in parallel) so the first trials find them ready; returns
        how many groups are up."""
        results = await asyncio.gather(*[self._ensure_built(g) for g in self.groups], return_exceptions=True)
        return sum(r is None for r in results)

    # ------------------------------------------------------------------ trials
    async def start(self, spec: TrialSpec) -> str:
        """Give trial ``spec.trial_id`` a free group (waiting for one) and start it there;
        returns the run's token. Called by the trial actor.

        Raises:
            Exception: the group could not be started (e.g. a worker failed to start), or the
                job's streamed feeds could not be built; the group is free again either way.
        """
        import ray

        cond = self._cond()
        async with cond:
            await cond.wait_for(lambda: any(g.run is None for g in self.groups))
            g = next(g for g in self.groups if g.run is None)
            run = PoolRun(uuid.uuid4().hex, spec.trial_id, g.slot, time.time(), last_beat=time.time())
            g.run = self.runs[run.token] = run
        try:
            await self._ensure_built(g)
            assert g.workers is not None  # built above
            g.hand_restarts_to(run)
            run.last_beat = time.time()  # the build may have taken a while; the trial polls from now on
            feeds = await self.feeds.for_run(g.slot, g.builds, spec.job)
            me = ray.get_runtime_context().current_actor
            refs = [w.run.remote(spec, me, run.token, feed) for w, feed in zip(g.workers, feeds, strict=True)]
        except BaseException:
            # A group left holding a run that never started would make later trials wait forever.
            g.failed_starts = 0  # this trial fails with the start's error: that records it
            self.runs.pop(run.token, None)
            await self._release(g)
            raise
        asyncio.ensure_future(self._watch(g, run, refs))
        return run.token

    async def _release(self, g: PoolGroup) -> None:
        cond = self._cond()
        async with cond:
            g.run = None
            cond.notify_all()

    async def _watch(self, g: PoolGroup, run: PoolRun, refs: list[Any]) -> None:
        """Wait for every rank of ``run``; record its result; free (or rebuild) the group."""
        from ray.exceptions import RayActorError

        async def one(ref: Any) -> Any:
            return await ref

        tasks = [asyncio.ensure_future(one(r)) for r in refs]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        if pending:  # a rank raised: the others get a moment to end too
            more, pending = await asyncio.wait(pending, timeout=RAISE_GRACE_S)
            done |= more
        errors = {r: e for r, t in enumerate(tasks) if t in done and (e := t.exception()) is not None}
        broken = bool(pending) or any(isinstance(e, RayActorError) for e in errors.values())
        if broken:
            self._discard(g)  # the next trial gets a new group
            for t in pending:
                t.cancel()
        if errors:
            # off the event loop: describing a dead rank may read its node (a Ray task)
            loop = asyncio.get_running_loop()
            run.result = await loop.run_in_executor(None, _failure, errors, len(refs), broken)
        else:
            outcomes = {t.result() for t in tasks}
            run.result = RunResult("stopped" if "stopped" in outcomes else "finished")
        run.ended = time.time()
        self.history.append(run.record(g.builds))
        run.event.set()
        if run.stop:  # its trial is gone and will not collect the result
            _drop_checkpoints(run.messages)
            self.runs.pop(run.token, None)
        await self._release(g)

    async def report(self, token: str, metrics: dict[str, Any]) -> bool:
        """Rank 0's metrics of one epoch; returns True when the trial is to stop now."""
        run = self.runs.get(token)
        if run is None:
            return True
        run.add_report(metrics)
        return run.stop or time.time() - run.last_beat > HEARTBEAT_TIMEOUT_S

    async def poll(self, token: str, timeout_s: float) -> tuple[list[dict[str, Any]], RunResult | None]:
        """(metrics reported since the last poll, the run's result once it ended). Waits up to
        ``timeout_s`` for news. Counts as a heartbeat."""
        run = self.runs.get(token)
        if run is None:
            return [], RunResult("failed", error="the trial's run is unknown to its worker group")
        run.last_beat = time.time()
        if not run.messages and run.result is None:
            try:
                await asyncio.wait_for(run.event.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
        run.event.clear()
        msgs, run.messages = run.messages, []
        if run.result is not None and not msgs:
            self.runs.pop(token, None)
            return [], run.result
        return msgs, None

    async def heartbeat(self, token: str) -> None:
        """The trial is alive."""
        run = self.runs.get(token)
        if run is not None:
            run.last_beat = time.time()

    async def stop(self, token: str) -> None:
        """Stop the run at its next epoch boundary (the trial was stopped or ended); the
        checkpoint folders of metrics its trial will not collect are removed."""
        run = self.runs.get(token)
        if run is not None:
            if not run.stop:
                run.stop, run.epochs_at_stop = True, run.epochs
            _drop_checkpoints(run.messages)
            run.messages = []
            if run.result is not None:
                self.runs.pop(token, None)

    # ------------------------------------------------------------------ inspection
    async def slot_of(self, token: str) -> int | None:
        """The group index running ``token`` (None once it ended and was collected)."""
        run = self.runs.get(token)
        return None if run is None else run.slot

    async def info(self) -> PoolsInfo:
        """Every group's state and one :class:`RunRecord` per ended run, oldest first."""
        return PoolsInfo(
            groups=[
                GroupInfo(
                    slot=g.slot,
                    up=g.workers is not None,
                    pids=list(g.pids),
                    builds=g.builds,
                    trial_id=g.run.trial_id if g.run else None,
                )
                for g in self.groups
            ],
            history=list(self.history),
        )

    async def idle(self, timeout_s: float) -> bool:
        """Wait until no group runs a trial (a stopped trial's group ends its epoch first);
        False if that took longer than ``timeout_s``."""
        cond = self._cond()
        async with cond:
            try:
                await asyncio.wait_for(cond.wait_for(lambda: all(g.run is None for g in self.groups)), timeout_s)
            except asyncio.TimeoutError:
                return False
        return True

    async def shutdown(self) -> None:
        """Stop every worker (driver, at the end of the sweep)."""
        for g in self.groups:
            self._discard(g)


def start_pools(*, groups: int, num_workers: int, cpus_per_worker: float, use_gpu: bool, data: list[Any]) -> Any:
    """Start the sweep's :class:`WorkerPools` actor and begin warming its groups (driver
    only, inside a running Ray cluster); returns its handle."""
    import ray

    handle: Any = (
        ray.remote(WorkerPools)
        .options(num_cpus=0, max_concurrency=1000)
        .remote(groups, num_workers, cpus_per_worker, use_gpu, data)
    )
    handle.warm.remote()
    return handle


def run_pooled(pools: Any, spec: TrialSpec) -> None:
    """Run one trial on a warm group and forward its per-epoch metrics to ``tune.report``.

    Runs in the Tune trial actor. When Tune stops the trial, its ``tune.report`` call does
    not return; the ``finally`` below tells the group to stop at its next epoch boundary
    (and if the actor is killed instead, the missing heartbeats do).

    Raises:
        WorkerLostError: a worker of the group died (which rank, where, how).
        TrialError: a rank raised, or the job's streamed feeds could not be built (one line;
            the traceback follows as cause); a start's own ``HpoError`` is raised as it is.
    """
    import ray
    from ray import tune
    from ray.exceptions import RayTaskError

    from ludwig_hpo.errors import HpoError, TrialError, WorkerLostError, one_line_error

    for stale in (Path(spec.storage_path) / spec.trial_id).glob(f"{PENDING_PREFIX}*"):  # left by an interrupted run
        shutil.rmtree(stale, ignore_errors=True)
    try:
        token = ray.get(pools.start.remote(spec))
    except RayTaskError as e:  # no group or no feeds for the trial: its own error, in one line
        if isinstance(e.cause, HpoError):
            raise e.cause from e
        what = f"{type(e.cause).__name__}: {e.cause}" if e.cause is not None else str(e)
        raise TrialError(one_line_error(what)) from e
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_INTERVAL_S):
            pools.heartbeat.remote(token)

    threading.Thread(target=beat, daemon=True, name="hpo-pool-heartbeat").start()
    result: RunResult | None = None
    pending: list[str] = []
    try:
        while result is None:
            msgs, result = ray.get(pools.poll.remote(token, 2.0))
            pending = [m[PENDING_CHECKPOINT_DIR] for m in msgs if PENDING_CHECKPOINT_DIR in m]
            for m in msgs:
                folder = m.pop(PENDING_CHECKPOINT_DIR, None)
                # Tune copies the folder into the trial's storage before report returns.
                tune.report(m, checkpoint=tune.Checkpoint.from_directory(folder) if folder else None)
                if folder:
                    shutil.rmtree(folder, ignore_errors=True)
                    pending.remove(folder)
    finally:
        done.set()
        for folder in pending:  # not reported: Tune stopped the trial first
            shutil.rmtree(folder, ignore_errors=True)
        if result is None:  # stopped by Tune, interrupted, or lost contact: free the group
            pools.stop.remote(token)
    if result.status == "failed":
        if result.loss is not None:
            raise WorkerLostError(result.loss) from RuntimeError(result.traceback)
        raise TrialError(one_line_error(result.error)) from RuntimeError(result.traceback)
