"""An executor spun in a thread of its own, and entity creation/destruction on the thread that spins.

rclpy's executors are not safe against a node's entities (subscriptions, publishers, clients, action
clients, timers, guard conditions, QoS event handlers) being created or destroyed by another thread while
they spin: the executor enters each entity's handle, then adds it to its wait set, and an entity destroyed
in between raises ``InvalidHandle: cannot use Destroyable because destruction was requested`` in the
spinning thread (an action client created meanwhile can even be waited on before its constructor ran to the
end: ``AttributeError: 'ActionClient' object has no attribute '_lock'``). The spinning thread then dies and
every future it should complete (a goal's answer, a result) never completes.

The rule here: **an entity is created and destroyed only where no other thread spins the executor that
holds it**, i.e.

* before the spin thread starts or after it stopped (:meth:`SpinThread.stop` joins it), or
* on the spinning thread itself, between two waits: :meth:`SpinThread.call` (and :func:`on_executor_thread`
  for a node of any single-threaded executor spun elsewhere) hands the creation or destruction to the
  executor as a task (``executor.create_task``, which triggers the executor's guard condition) and waits for
  it. The executor runs tasks before it gathers the entities of its next wait set, so the wait set never
  holds a handle another thread is destroying.

A :class:`SpinThread` also answers whether it still spins (:meth:`SpinThread.check`): a client waiting for an
answer the dead thread can no longer deliver fails at once with the cause (:class:`SpinThreadDied`) instead
of waiting for its timeout. :func:`walk_mpc.tools.send_walk.send_walk` and
:func:`~walk_mpc.tools.send_walk.current_feet` use both.

    spin = SpinThread(SingleThreadedExecutor(context=context), name="demo-spin")
    spin.add_node(node)                        # nodes and their long-lived entities: before start()
    spin.start()
    sub = spin.call(node.create_subscription, Msg, "topic", callback, 10)   # while it spins
    spin.call(node.destroy_subscription, sub)
    spin.stop()                                 # joins the thread; then destroy the nodes
"""

from __future__ import annotations

import concurrent.futures
import threading
import weakref
from typing import Any, Callable, Optional, TypeVar

from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

T = TypeVar("T")

#: Default time [s] a creation or destruction waits for the spinning thread to run it.
CALL_TIMEOUT = 10.0

#: Executor -> its SpinThread (weak both ways: a SpinThread holds its executor, its running thread holds it).
_SPIN_THREADS: weakref.WeakKeyDictionary[Executor, weakref.ref[SpinThread]] = weakref.WeakKeyDictionary()


class SpinThreadDied(RuntimeError):
    """The thread spinning a node's executor stopped (its error is the ``__cause__``): nothing the node
    waits for (a goal's answer, a result, a message) can arrive any more."""


class SpinThread:
    """Spins ``executor`` in a daemon thread; runs creations and destructions of entities on that thread.

    Args:
        executor: A :class:`~rclpy.executors.SingleThreadedExecutor` (or subclass): its callbacks and tasks
            run on the spinning thread. A MultiThreadedExecutor runs tasks in its pool while its own thread
            waits, which :meth:`call` cannot make safe: refused.
        name: Name of the thread.
        on_death: Called (on the dying thread) with the error that ended the spinning, if any, before the
            waiters of :meth:`call` are failed: e.g. to wake a condition variable the owner waits on.

    Raises:
        TypeError: ``executor`` is not single-threaded.
    """

    def __init__(self, executor: Optional[Executor] = None, *, context=None, name: str = "spin",
                 on_death: Optional[Callable[[Optional[BaseException]], None]] = None) -> None:
        if executor is None:
            executor = SingleThreadedExecutor(context=context)
        if not isinstance(executor, SingleThreadedExecutor):
            raise TypeError(f"SpinThread needs a single-threaded executor, not {type(executor).__name__}: "
                            "a multi-threaded one runs tasks while it waits")
        self.executor = executor
        self.name = name
        self._on_death = on_death
        self._lock = threading.Lock()
        self._pending: set = set()
        self._stopping = False
        self._error: Optional[BaseException] = None
        self.died = threading.Event()  # set when the thread ended (stopped or failed)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        _SPIN_THREADS[executor] = weakref.ref(self)

    # -- life cycle
    def add_node(self, node: Node) -> None:
        """Add ``node`` to the executor (before :meth:`start`, or while spinning: adding is safe, the
        executor takes the node's entities into its next wait set)."""
        self.executor.add_node(node)

    def remove_node(self, node: Node) -> None:
        """Remove ``node`` from the executor, on the spinning thread (so its entities may then be destroyed
        from any thread: no wait set holds them any more)."""
        self.call(self.executor.remove_node, node)

    def destroy_node(self, node: Node) -> None:
        """Remove ``node`` from the executor and destroy it, on the spinning thread."""
        def destroy() -> None:
            self.executor.remove_node(node)
            node.destroy_node()

        self.call(destroy)

    def start(self) -> SpinThread:
        """Start spinning."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop spinning and join the thread, then shut the executor down; True if the thread ended.

        After this, entities of the executor's nodes may be destroyed from the calling thread.
        """
        with self._lock:
            self._stopping = True
        if self.on_thread():  # from a callback: the loop ends after it
            return False
        if self._thread.is_alive():
            self.executor.create_task(lambda: None)  # wakes the wait (guard condition): the loop ends
            self._thread.join(timeout)
        ended = not self._thread.is_alive()
        if ended:
            self.executor.shutdown(timeout_sec=0.0)  # nothing spins it any more
        return ended

    # -- state
    @property
    def spinning(self) -> bool:
        """True while the thread spins."""
        return self._thread.is_alive() and not self.died.is_set()

    @property
    def error(self) -> Optional[BaseException]:
        """What ended the spinning (None while it spins, or after :meth:`stop`)."""
        return self._error

    def check(self) -> None:
        """Raise :class:`SpinThreadDied` (from its cause) unless the thread spins.

        Raises:
            SpinThreadDied: The thread ended (an error in the executor or a callback, the context shut
                down, :meth:`stop`), or was never started.
        """
        if self.spinning:
            return
        if not self._thread.is_alive() and not self.died.is_set():
            raise SpinThreadDied(f"spin thread '{self.name}' was not started")
        error = self._error
        if error is None:
            raise SpinThreadDied(f"spin thread '{self.name}' stopped")
        raise SpinThreadDied(f"spin thread '{self.name}' died: {error!r}") from error

    # -- running on the spinning thread
    def on_thread(self) -> bool:
        """True when called from the spinning thread."""
        return threading.current_thread() is self._thread

    def call(self, fn: Callable[..., T], *args: Any, timeout: Optional[float] = CALL_TIMEOUT) -> T:
        """``fn(*args)`` run where no other thread spins the executor; returns its result or raises its error.

        On the spinning thread (a callback), or when the thread does not spin (before :meth:`start`,
        after :meth:`stop` or its death, which :meth:`check` reports), ``fn`` runs at once in the caller;
        else it runs as a task of the executor on the spinning thread, between two waits, and this waits for
        it.

        Raises:
            SpinThreadDied: The thread died before running ``fn``.
            TimeoutError: ``fn`` did not run within ``timeout`` [s] (a callback blocks the thread).
        """
        if self.on_thread():
            return fn(*args)
        result: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            spinning = self._thread.is_alive() and not self._stopping and not self.died.is_set()
            if spinning:
                self._pending.add(result)
        if not spinning:  # nothing spins the executor (any more): no wait set to race with
            return fn(*args)

        def task() -> None:  # never raises: an error would end spin() on the executor's thread
            if result.set_running_or_notify_cancel():
                try:
                    result.set_result(fn(*args))
                except BaseException as exc:  # handed to the caller
                    result.set_exception(exc)

        try:
            self.executor.create_task(task)
            try:
                return result.result(timeout)
            except concurrent.futures.TimeoutError:
                if result.cancel():
                    raise TimeoutError(f"spin thread '{self.name}' did not run {getattr(fn, '__name__', fn)} "
                                       f"within {timeout} s") from None
                return result.result()  # it started meanwhile: it ends soon
        finally:
            with self._lock:
                self._pending.discard(result)

    # -- the thread
    def _run(self) -> None:
        error: Optional[BaseException] = None
        try:
            while not self._stopping and self.executor.context.ok():
                self.executor.spin_once()  # blocks until work; stop() queues a task to wake it
            if not self._stopping:
                error = ExternalShutdownException("the context shut down")
        except BaseException as exc:  # reported to every waiter: a dead spinner would only time out
            error = exc
        finally:
            self._finish(error)

    def _finish(self, error: Optional[BaseException]) -> None:
        with self._lock:
            self._error = error
            self.died.set()
            pending, self._pending = list(self._pending), set()
        if self._on_death is not None:
            try:
                self._on_death(error)
            except Exception:  # noqa: BLE001 - the waiters below must be released whatever happens
                pass
        for result in pending:
            if not result.done() and result.set_running_or_notify_cancel():
                died = SpinThreadDied(f"spin thread '{self.name}' "
                                      + (f"died: {error!r}" if error is not None else "stopped"))
                died.__cause__ = error
                result.set_exception(died)


def spin_thread_of(node: Node) -> Optional[SpinThread]:
    """The :class:`SpinThread` spinning ``node``'s executor, if any."""
    return _spin_thread(node.executor)


def _spin_thread(executor: Optional[Executor]) -> Optional[SpinThread]:
    ref = None if executor is None else _SPIN_THREADS.get(executor)
    return None if ref is None else ref()


def on_executor_thread(node: Node, fn: Callable[..., T], *args: Any,
                       timeout: Optional[float] = CALL_TIMEOUT) -> T:
    """``fn(*args)`` (creating or destroying entities of ``node``) where no other thread spins ``node``.

    * ``node`` in no executor: runs here (the caller spins it, if anyone does);
    * ``node`` spun by a :class:`SpinThread`: :meth:`SpinThread.call`;
    * ``node`` in another single-threaded executor: as a task of that executor, which must be spun by
      another thread (an executor nobody spins raises TimeoutError after ``timeout`` [s]). Do not call this
      from a callback of that executor (it would wait for itself: use a SpinThread, which runs it at once).

    Raises:
        SpinThreadDied: The SpinThread died.
        TimeoutError: The executor did not run ``fn`` within ``timeout``.
        TypeError: ``node`` is in a multi-threaded executor (no thread is free of its waits).
    """
    executor = node.executor
    if executor is None:
        return fn(*args)
    spin = _spin_thread(executor)
    if spin is not None:
        return spin.call(fn, *args, timeout=timeout)
    if not isinstance(executor, SingleThreadedExecutor):
        raise TypeError(f"node '{node.get_name()}' is in a {type(executor).__name__}: its entities cannot be "
                        "created or destroyed safely while it spins; use a SpinThread")
    result: concurrent.futures.Future = concurrent.futures.Future()

    def task() -> None:
        if result.set_running_or_notify_cancel():
            try:
                result.set_result(fn(*args))
            except BaseException as exc:  # handed to the caller
                result.set_exception(exc)

    executor.create_task(task)
    try:
        return result.result(timeout)
    except concurrent.futures.TimeoutError:
        if result.cancel():
            raise TimeoutError(f"the executor of node '{node.get_name()}' did not run "
                               f"{getattr(fn, '__name__', fn)} within {timeout} s: is a thread spinning it?"
                               ) from None
        return result.result()
