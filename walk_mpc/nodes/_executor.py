"""A single-threaded executor that hands messages to subscription callbacks straight from the wait.

rclpy's :class:`~rclpy.executors.SingleThreadedExecutor` rebuilds its wait set and walks every entity of every
node in Python on each wake-up (for a graph node here: 2-3 subscriptions, 7-9 parameter and gesture services,
a timer and 10-16 QoS event handlers), then wraps the callback in a task. On the 2 vCPUs of the reference
machine, with caches cold after the 10 ms between two sensor samples, that costs 0.2-0.3 ms per message on
the sensor -> joint command path, which crosses three nodes, and about half the CPU of a node woken at 100 Hz
(the sim's timer, walk_behavior's samples).

:class:`FastDispatchExecutor` keeps one wait set of the nodes' subscriptions, timers, services, clients, guard
conditions and waitables other than QoS event handlers (action servers and clients), rebuilt only when that
set changes (checked when a guard condition fires: rclpy wakes the executor whenever a node gains or loses an
entity, and when a node is added or removed). When a subscription is ready it takes the message and calls the
callback directly; when a timer is due it calls the timer and its callback directly (a plain callback: one
taking a ``TimerInfo`` or a coroutine goes to the base machinery); both respect callback groups. The messages
go before the timers of the same wake-up: after a stall, walk_behavior's steady-clock sensor timeout must see
the samples that arrived during it, and the sim applies the commands that came before it steps. After each
wait it resumes the tasks in progress once (as the base executor does at each wake-up: an action's execute
coroutine, tasks of ``create_task``). Any other ready entity (service, client, a node's guard condition,
action server or client), and the rest (QoS event handlers, and the parameter and type-description services
rclpy gives every node: 7 entities a node), polled every ``DRAIN_PERIOD`` and answered within it when ready,
is executed by the base executor's own machinery, so services, futures, actions and events behave as with
:class:`SingleThreadedExecutor`. The executor's own guard condition, which that machinery triggers after each
callback it runs, wakes it without a drain (else each drain would cause the next one).

It uses rclpy's wait-set binding (``rclpy.impl.implementation_singleton``), present in every distribution
since Foxy; :func:`fast_dispatch_supported` says whether this rclpy has it.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Dict, List, Optional

from rclpy.event_handler import EventHandler
from rclpy.exceptions import InvalidHandle, TimerCancelledError
from rclpy.executors import (
    ConditionReachedException,
    ShutdownException,
    SingleThreadedExecutor,
    TimeoutException,
)
from rclpy.waitable import NumberOfEntities

try:  # the binding the base executor itself uses
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
except ImportError:  # pragma: no cover - very old rclpy
    _rclpy = None

#: Wait-set entity kinds executed by the base executor's machinery (besides timers not called directly, guard
#: conditions other than the executor's own, and the waitables).
_OTHER_KINDS = ("service", "client")

#: Longest time [s] the non-subscription work of the nodes (QoS events, tasks) waits to be executed.
DRAIN_PERIOD = 0.1


#: Modules of the services every rclpy node makes (parameters, type descriptions): 7 of a node's entities,
#: served every ``DRAIN_PERIOD`` by the base machinery rather than waited on at each wake-up.
_INTROSPECTION_SERVICES = ("rcl_interfaces.srv", "type_description_interfaces.srv")


def _introspection(service) -> bool:
    """Whether ``service`` is one of the parameter or type-description services rclpy gives every node."""
    return getattr(service.srv_type, "__module__", "").startswith(_INTROSPECTION_SERVICES)


def fast_dispatch_supported() -> bool:
    """True when this rclpy exposes the wait-set API :class:`FastDispatchExecutor` relies on."""
    return _rclpy is not None and all(
        hasattr(_rclpy.WaitSet, name)
        for name in ("clear_entities", "add_subscription", "add_timer", "add_service", "add_client",
                     "add_guard_condition", "wait", "get_ready_entities"))


def _held_wait(ws, handles: list, adders: list, waitables: list, timeout_ns: int) -> bool:
    """Fill ``ws`` (each ``(add, handle)`` of ``adders``, the waitables) and wait up to ``timeout_ns``, every
    handle held as the base executor holds them (destroying an entity, at shutdown, waits for the wait's
    end); returns whether a waitable is ready, checked before the handles are let go (the base executor takes
    their data after its own wait).

    Raises:
        InvalidHandle: An entity was destroyed.
    """
    entered = entered_waitables = 0
    try:
        for handle in handles:
            handle.__enter__()
            entered += 1
        for waitable in waitables:
            waitable.__enter__()
            entered_waitables += 1
        ws.clear_entities()
        for add, handle in adders:
            add(handle)
        for waitable in waitables:
            waitable.add_to_wait_set(ws)
        ws.wait(timeout_ns)
        return any([waitable.is_ready(ws) for waitable in waitables])
    finally:
        for waitable in reversed(waitables[:entered_waitables]):
            waitable.__exit__(None, None, None)
        for handle in reversed(handles[:entered]):
            handle.__exit__(None, None, None)


class FastDispatchExecutor(SingleThreadedExecutor):
    """Single-threaded executor with direct dispatch of subscription messages and timer callbacks (see the
    module docstring)."""

    def __init__(self, *, context=None) -> None:
        super().__init__(context=context)
        self._key: Optional[tuple] = None
        self._check_entities = True  # a guard condition fired (or first spin): the entities may have changed
        self._wait_set = None
        self._subscriptions: List[Any] = []
        self._timers: List[Any] = []
        self._waitables: List[Any] = []  # action servers and clients: in the wait set, run by the base
        self._services: List[Any] = []  # those in the wait set
        self._slow_wait_set = None  # the parameter services and QoS event handlers, polled
        self._slow_adders: List[tuple] = []
        self._slow_handles: List[Any] = []
        self._slow_waitables: List[Any] = []
        self._adders: List[tuple] = []  # (wait-set adder, handle) of every entity, subscriptions first
        self._fallback = not fast_dispatch_supported()
        self._node_guards: List[Any] = []
        self._handles: List[Any] = []
        self._next_drain = 0.0
        self._direct_timers: Dict[Any, tuple] = {}  # timer -> (its callback, whether it is called directly)
        self._added: Dict[Any, int] = {}  # node -> rank of its addition (rclpy keeps the nodes in a set)

    def add_node(self, node) -> bool:
        """Add ``node``; the messages of one wake-up are handed to the nodes in the order they were added."""
        self._added.setdefault(node, len(self._added))
        return super().add_node(node)

    def remove_node(self, node) -> None:
        super().remove_node(node)
        self._added.pop(node, None)

    def get_nodes(self) -> list:
        """The nodes, in the order they were added."""
        added = self._added
        return sorted(super().get_nodes(), key=lambda node: added.get(node, len(added)))

    def _entity_key(self, nodes) -> tuple:
        return tuple((id(node), tuple(map(id, node.subscriptions)), tuple(map(id, node.timers)),
                      tuple(map(id, node.services)), tuple(map(id, node.clients)),
                      tuple(map(id, node.guards)), tuple(map(id, node.waitables))) for node in nodes)

    def _rebuild(self, nodes) -> None:
        self._subscriptions = [sub for node in nodes for sub in node.subscriptions]
        self._timers = timers = [t for node in nodes for t in node.timers]
        self._services = services = [s for node in nodes for s in node.services if not _introspection(s)]
        clients = [c for node in nodes for c in node.clients]
        self._node_guards = [g for node in nodes for g in node.guards]
        guards = self._node_guards + [g for g in (self._guard, self._sigint_gc) if g is not None]
        self._waitables = [w for node in nodes for w in node.waitables if not isinstance(w, EventHandler)]
        self._direct_timers = {}
        self._fallback = not fast_dispatch_supported()
        if self._fallback:
            self._wait_set = None
            return
        counts = NumberOfEntities(len(self._subscriptions), len(guards), len(timers), len(clients),
                                  len(services))
        for waitable in self._waitables:
            with waitable:
                counts += waitable.get_num_entities()
        ws = self._wait_set = _rclpy.WaitSet(counts.num_subscriptions, counts.num_guard_conditions,
                                             counts.num_timers, counts.num_clients, counts.num_services,
                                             counts.num_events, self._context.handle)
        self._adders = ([(ws.add_subscription, sub.handle) for sub in self._subscriptions]
                        + [(ws.add_timer, t.handle) for t in timers]
                        + [(ws.add_service, srv.handle) for srv in services]
                        + [(ws.add_client, c.handle) for c in clients]
                        + [(ws.add_guard_condition, g.handle) for g in guards])
        self._handles = [handle for _, handle in self._adders] + [self._context.handle]
        # The rest, polled every DRAIN_PERIOD: the drain (a pass of the base machinery over every entity,
        # 0.3-0.8 ms) runs only when something of it is ready.
        slow_services = [s for node in nodes for s in node.services if _introspection(s)]
        self._slow_waitables = [w for node in nodes for w in node.waitables if isinstance(w, EventHandler)]
        counts = NumberOfEntities(0, 0, 0, 0, len(slow_services))
        for waitable in self._slow_waitables:
            with waitable:
                counts += waitable.get_num_entities()
        slow = self._slow_wait_set = _rclpy.WaitSet(0, 0, 0, 0, counts.num_services, counts.num_events,
                                                    self._context.handle)
        self._slow_adders = [(slow.add_service, srv.handle) for srv in slow_services]
        self._slow_handles = [handle for _, handle in self._slow_adders] + [self._context.handle]

    def _slow_ready(self) -> bool:
        """Whether a parameter or type-description service or a QoS event handler is ready (or the poll could
        not tell: an entity was destroyed)."""
        ws = self._slow_wait_set
        try:
            waitable_ready = _held_wait(ws, self._slow_handles, self._slow_adders, self._slow_waitables, 0)
            return bool(ws.get_ready_entities("service")) or waitable_ready
        except InvalidHandle:
            self._key = None
            return True

    def _refresh(self) -> None:
        """Rebuild the wait set if the nodes or their entities changed."""
        self._check_entities = False
        nodes = self.get_nodes()
        key = self._entity_key(nodes)
        if key != self._key:
            self._key = key
            self._rebuild(nodes)

    def spin_once(self, timeout_sec: Optional[float] = None) -> None:
        if self._check_entities:
            self._refresh()
        if self._fallback:
            self._check_entities = True  # the base executor sees every change itself; follow it cheaply
            return super().spin_once(timeout_sec)
        now = time.monotonic()
        if now >= self._next_drain:
            if self._slow_ready():
                self._drain()
            self._next_drain = now + DRAIN_PERIOD
            self._check_entities = True  # and, as often, make sure no change went unseen
        wait_s = self._next_drain - now if timeout_sec is None or timeout_sec < 0 else min(
            timeout_sec, self._next_drain - now)
        ready = self._wait(max(0.0, wait_s))
        if ready is None:
            return
        subscriptions, timers, others = ready
        for sub in subscriptions:  # the data first: a timer that checks a stream's liveness sees what came
            self._dispatch(sub)
        for timer in timers:
            others |= not self._fire(timer)
        if self._tasks:
            self._run_tasks()
        if others:
            for guard in self._node_guards:  # the wait took their trigger: let the base executor see it
                guard._executor_triggered = True
            self._drain()

    def _wait(self, timeout_s: float) -> Optional[tuple]:
        ws = self._wait_set
        try:
            timeout_ns = int(timeout_s * 1e9)
            ready_waitables = _held_wait(ws, self._handles, self._adders, self._waitables, timeout_ns)
        except InvalidHandle:  # an entity was destroyed: rebuild the wait set
            self._key = None
            self._check_entities = True
            return None
        if self._is_shutdown or not self._context.ok():
            return None
        ready_subs = ws.get_ready_entities("subscription")
        subscriptions = [sub for sub in self._subscriptions if sub.handle.pointer in ready_subs]
        ready_timers = ws.get_ready_entities("timer")
        timers = [t for t in self._timers if t.handle.pointer in ready_timers] if ready_timers else []
        guards = ws.get_ready_entities("guard_condition")
        if guards:
            self._check_entities = True
        # The executor's own guard condition (a task created, an entity added or removed, and each handler
        # the base machinery ran) needs no drain: the tasks are run after every wait, the entities checked.
        others = ready_waitables or any(ws.get_ready_entities(kind) for kind in _OTHER_KINDS) or (
            bool(guards) and (self._guard is None or any(g != self._guard.handle.pointer for g in guards)))
        return subscriptions, timers, others

    def _dispatch(self, sub) -> None:
        """Take one message of ``sub`` and run its callback here (as the base executor's handler would)."""
        group = sub.callback_group
        if not self.can_execute(sub) or not group.beginning_execution(sub):
            return
        try:
            try:
                with sub.handle:
                    taken = sub.handle.take_message(sub.msg_type, sub.raw)
            except InvalidHandle:  # destroyed since the wait
                return
            if taken is None:
                return
            callback_type = getattr(sub, "_callback_type", None)  # rclpy >= Jazzy: callbacks with info
            if callback_type is not None and callback_type.name == "WithMessageInfo":
                sub.callback(*taken)
            else:
                sub.callback(taken[0])
        finally:
            group.ending_execution(sub)

    def _direct(self, timer) -> bool:
        """Whether ``timer``'s callback is called here: a plain function of no argument (not a coroutine
        function, no ``TimerInfo`` parameter), as the base executor would call it."""
        callback = timer.callback
        known = self._direct_timers.get(timer)
        if known is None or known[0] is not callback:
            direct = callback is not None and not inspect.iscoroutinefunction(callback)
            if direct:
                try:
                    direct = not inspect.signature(callback).parameters
                except (TypeError, ValueError):
                    direct = False
            known = self._direct_timers[timer] = (callback, direct)
        return known[1]

    def _fire(self, timer) -> bool:
        """Call a due timer and its callback here (as the base executor's handler would); False when it is
        left to the base machinery."""
        if not self._direct(timer):
            return False
        group = timer.callback_group
        if group is None or not self.can_execute(timer) or not group.beginning_execution(timer):
            return True
        try:
            try:
                with timer.handle:
                    if not timer.handle.is_timer_ready():  # rcl reports cancelled timers as ready
                        return True
                    timer.handle.call_timer()
            except (InvalidHandle, TimerCancelledError):
                return True
            callback = timer.callback
            if callback is not None:
                callback()
        finally:
            group.ending_execution(timer)
        return True

    def _run_tasks(self) -> None:
        """Run (resume) every task in progress once, as the base executor does at each of its wake-ups (an
        action's execute coroutine that polls its goal, a task made by ``create_task``); a task's error ends
        the spin as there."""
        nodes = self.get_nodes()
        with self._tasks_lock:
            tasks = list(self._tasks)
        for task, _, node in tasks:
            if not task.executing() and not task.done() and (node is None or node in nodes):
                task()
                exception = task.exception() if task.done() else None
                if exception is not None:
                    raise exception
        with self._tasks_lock:
            self._tasks = [entry for entry in self._tasks if not entry[0].done() and not entry[0].cancelled()]

    def _drain(self) -> None:
        """Execute whatever the base executor finds ready now (services, events, actions, tasks, ...)."""
        while not self._is_shutdown:
            try:
                handler, _, _ = self.wait_for_ready_callbacks(timeout_sec=0)
            except (TimeoutException, ShutdownException, ConditionReachedException):
                return
            handler()
            exception = handler.exception()
            if exception is not None:
                raise exception
