"""Tracking writes on a background thread: run in submission order, waited for by flush,
and a failed write raised on the caller's thread once."""

from __future__ import annotations

import threading
import time

import pytest

from ludwig_hpo.tracking.writer import OrderedWriter


def test_calls_run_in_order_off_the_callers_thread_and_flush_waits_for_them():
    w = OrderedWriter()
    done, threads = [], set()

    def slow(i):
        time.sleep(0.01 if i % 2 == 0 else 0)
        threads.add(threading.current_thread().name)
        done.append(i)

    for i in range(10):
        w.submit(lambda i=i: slow(i))
    w.flush()
    assert done == list(range(10))
    assert threading.current_thread().name not in threads
    assert w.call(lambda: len(done)) == 10  # a read sees every earlier write
    w.close()


def test_a_failed_write_is_raised_once_by_the_next_event_and_later_writes_still_run():
    w = OrderedWriter()
    ran = []
    failed = w.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()
    with pytest.raises(ZeroDivisionError):
        w.submit(lambda: ran.append("after"))
    w.flush()  # raised once: nothing pending
    assert ran == []  # the event that raised was not queued
    w.submit(lambda: ran.append("next"))
    w.flush()
    assert ran == ["next"]
    with pytest.raises(ZeroDivisionError):
        w.call(lambda: 1 / 0)
    w.flush()  # a call's own error is not raised again
    w.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        w.flush()
    w.close()


def test_flush_until_a_call_waits_for_it_and_the_earlier_ones_only():
    w = OrderedWriter()
    gate, done = threading.Event(), []
    first = w.submit(lambda: done.append(1))
    w.submit(lambda: (gate.wait(30), done.append(2)))
    w.flush(until=first)
    assert done == [1]  # the held second call is not waited for
    gate.set()
    w.close()
    assert done == [1, 2]


def test_an_interrupt_while_flush_waits_goes_through():
    import signal

    w = OrderedWriter()
    gate = threading.Event()
    held = w.submit(lambda: gate.wait(30))

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(KeyboardInterrupt):
            w.flush(until=held)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        gate.set()
        w.close()
