"""Shared plumbing of the walk_mpc nodes: parameters from dataclasses, config file, and main()."""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.logging import LoggingSeverity
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from walk_mpc.core.errors import ParameterError, UnknownKeyError, WalkMpcError
from walk_mpc.core.params import flatten, from_mapping, load_yaml, node_section, to_mapping, unflatten
from walk_mpc.fastdds_shm import clean_zombies_reported
from walk_mpc.graph import STACKS_SIGNAL
from walk_mpc.nodes._executor import FastDispatchExecutor, fast_dispatch_supported
from walk_mpc.nodes.node_logger import node_logger

T = TypeVar("T")

PACKAGE = "walk_mpc"


class RosLog:
    """A core controller's :class:`~walk_mpc.core.control.types.Log` on a node's rclpy logger.

    Warnings and errors are throttled per call site in the core (``period`` [s]), as rclpy's
    ``throttle_duration_sec`` throttles per call site in a node; debug and info pass through.
    """

    def __init__(self, logger, period: float = 1.0) -> None:
        self._logger = logger
        self._period = period
        self._last: dict = {}  # call site -> monotonic time of its last message

    def _throttled(self) -> bool:
        frame = sys._getframe(2)
        site = (frame.f_code, frame.f_lineno)
        now = time.monotonic()
        last = self._last.get(site)
        if last is not None and now - last < self._period:
            return True
        self._last[site] = now
        return False

    def debug(self, msg: str) -> None:
        self._logger.debug(msg)

    def info(self, msg: str) -> None:
        self._logger.info(msg)

    def warning(self, msg: str) -> None:
        if not self._throttled():
            self._logger.warning(msg)

    def error(self, msg: str) -> None:
        if not self._throttled():
            self._logger.error(msg)


def reliable_qos(depth: int = 10) -> QoSProfile:
    """QoS of the graph's streams: reliable, volatile, keep the last ``depth``."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def stream_input_qos(depth: int = 10) -> QoSProfile:
    """QoS of the control loop's inputs (sensor_state, com_reference, joint_trajectory): best effort.

    The latest sample wins. A reliable reader delivers in order, so one sample lost on the way holds back
    every later one until the writer repairs it: measured here, 250-340 ms with no input, enough to make
    the IK report stale references and abort a walk. A best-effort reader matches the graph's reliable
    writers and sensor-data (best-effort) drivers alike.
    """
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)


#: QoS of latched topics (walk/plan, sim/fall): reliable, transient local, the last message only.
LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)


def publisher_events(node: Node, topic: str) -> PublisherEventCallbacks:
    """Event callbacks of a publisher on ``topic``: each change in its matched subscribers is logged at
    DEBUG (``--ros-args --log-level <node>:=debug``), e.g. ``'/wheel_contact': 1 subscriber(s) matched``.

    The node's own view of the graph: a peer seeing this endpoint does not mean this endpoint sees the
    peer yet (DDS discovery is not symmetric), and a volatile writer's samples published before it
    matched a reader never reach that reader.
    """
    return PublisherEventCallbacks(matched=_match_logger(node, topic, "subscriber"))


def subscription_events(node: Node, topic: str) -> SubscriptionEventCallbacks:
    """Event callbacks of a subscription on ``topic``: each change in its matched publishers is logged
    at DEBUG, like :func:`publisher_events`."""
    return SubscriptionEventCallbacks(matched=_match_logger(node, topic, "publisher"))


def _match_logger(node: Node, topic: str, peer: str) -> Callable[[Any], None]:
    name = node.resolve_topic_name(topic)

    def log(info) -> None:
        node.get_logger().debug(f"'{name}': {info.current_count} {peer}(s) matched "
                                f"({info.current_count_change:+d})")

    return log


#: The parameter every walk_mpc node declares besides its dataclass: SCHED_FIFO priority of its process.
REALTIME_PRIORITY = "realtime_priority"

#: Contexts whose :func:`run` is building its node (True), then what that node's early
#: :func:`apply_realtime_priority` returned and its log messages (logged by :func:`run` once the node is
#: built, so that a node's first log line still marks the end of its construction). The process is scheduled
#: under SCHED_FIFO from the declaration of ``realtime_priority`` on, so the rest of the construction (robot
#: model, numba kernels: most of a restart, issue 17) and the middleware's discovery threads do not wait
#: behind normally scheduled processes.
_EARLY_PRIORITY: dict = {}

#: The other one: run the node on :class:`~walk_mpc.nodes._executor.FastDispatchExecutor` (else rclpy's
#: SingleThreadedExecutor).
FAST_DISPATCH = "fast_dispatch"


class GraphNode(Node):
    """Base of the walk_mpc nodes.

    Declares ``realtime_priority`` (int, 0 = normal scheduling, 1-99 = SCHED_FIFO priority of the node's
    process, applied by :func:`run` as soon as it is declared, before the rest of the node's construction:
    see :func:`apply_realtime_priority`) and ``fast_dispatch`` (bool,
    default true: :func:`run` spins the node on :class:`~walk_mpc.nodes._executor.FastDispatchExecutor`,
    false: on rclpy's SingleThreadedExecutor). When the node's log level is
    DEBUG at the creation of a publisher or subscription, it logs its matches (:func:`publisher_events`,
    :func:`subscription_events`) unless given other event callbacks.
    """

    def __init__(self, node_name: str, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        if not self.has_parameter(REALTIME_PRIORITY):
            self.declare_parameter(REALTIME_PRIORITY, 0, ParameterDescriptor(
                dynamic_typing=True,
                description="SCHED_FIFO priority of this node's process (1-99; 0 = normal scheduling). "
                            "Applied when the node runs as its own process; needs root, CAP_SYS_NICE or an "
                            "rtprio limit, else a warning and normal scheduling."))
        if not self.has_parameter(FAST_DISPATCH):
            self.declare_parameter(FAST_DISPATCH, True, ParameterDescriptor(
                dynamic_typing=True,
                description="Spin this node's process on walk_mpc's FastDispatchExecutor (messages handed to "
                            "subscription callbacks straight from the wait; 0.1-0.3 ms less per message on "
                            "the control path); false: rclpy's SingleThreadedExecutor."))
        if _EARLY_PRIORITY.get(self.context) is True:  # run() builds this node: schedule the process now,
            messages: list = []                          # before the robot model and the kernels load
            _EARLY_PRIORITY[self.context] = (apply_realtime_priority(self, messages), messages)

    def get_logger(self):
        """The node's logger: :func:`~walk_mpc.nodes.node_logger.node_logger` (rclpy's, without its inspection
        of each caller)."""
        logger = self.__dict__.get("_walk_mpc_logger")
        if logger is None:
            logger = self._walk_mpc_logger = node_logger(super().get_logger())
        return logger

    def create_publisher(self, msg_type, topic, qos_profile, **kwargs):
        if self._log_matches():
            kwargs.setdefault("event_callbacks", publisher_events(self, topic))
        return super().create_publisher(msg_type, topic, qos_profile, **kwargs)

    def create_subscription(self, msg_type, topic, callback, qos_profile, **kwargs):
        if self._log_matches():
            kwargs.setdefault("event_callbacks", subscription_events(self, topic))
        return super().create_subscription(msg_type, topic, callback, qos_profile, **kwargs)

    def _log_matches(self) -> bool:
        # Only at DEBUG: each event handler is one more waitable in every executor wait, which costs
        # the control loop (measured: occasional 45-100 ms p99 latency spikes in the demo with them).
        return self.get_logger().get_effective_level() <= LoggingSeverity.DEBUG


def default_config_path() -> Path:
    """The installed ``share/walk_mpc/config/walk_mpc.yaml``, or the source tree's when not installed."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            return Path(get_package_share_directory(PACKAGE)) / "config" / "walk_mpc.yaml"
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    return Path(__file__).resolve().parents[2] / "config" / "walk_mpc.yaml"


def config_defaults(node_name: str, path: Optional[os.PathLike] = None) -> dict[str, Any]:
    """The ``ros__parameters`` of ``node_name`` in the config file (the graph's single source of truth)."""
    path = Path(path) if path else default_config_path()
    return node_section(load_yaml(path), node_name, source=str(path))


#: Parameters of a node that are not fields of its dataclass: ROS's own, and the one GraphNode declares.
_OTHER_NODE_PARAMETERS = ("use_sim_time", "qos_overrides", "start_type_description_service",
                          REALTIME_PRIORITY, FAST_DISPATCH)


class DataclassParameters:
    """ROS parameters of a node declared from a parameters dataclass, read back into it.

    Values come from ``--params-file``, ``-p name:=value`` or the ``parameter_overrides`` of the node;
    any override that is not a field of the dataclass is rejected with :class:`UnknownKeyError`, like an
    unknown key in a YAML file (rclpy would silently ignore it). Parameters are declared with dynamic typing:
    ROS would refuse ``1`` for a float or crash on ``[]`` in a parameters file (type NOT_SET); the dataclass
    converts and validates the types instead, with messages naming the parameter.

    Args:
        node: The node (created with :func:`node_options`).
        cls: The parameters dataclass (nested dataclasses become dotted names).
        prefix: Dotted prefix of the parameter names ('' for none).
    """

    def __init__(self, node: Node, cls: type, prefix: str = "") -> None:
        self._node = node
        self._cls = cls
        self._prefix = prefix
        self._defaults = flatten(to_mapping(cls()), prefix)
        self.names = sorted(self._defaults)
        descriptor = ParameterDescriptor(dynamic_typing=True)
        for name, value in self._defaults.items():
            if not node.has_parameter(name):
                node.declare_parameter(name, value, descriptor)

    def _unknown_overrides(self) -> list[str]:
        overrides = getattr(self._node, "_parameter_overrides", {})  # rclpy keeps them per node
        start = f"{self._prefix}." if self._prefix else ""
        return sorted(name for name in overrides
                      if name.startswith(start) and name not in self._defaults
                      and name.split(".")[0] not in _OTHER_NODE_PARAMETERS)

    def read(self) -> Any:
        """The dataclass built from the current parameter values.

        Raises:
            UnknownKeyError: An override under the prefix is not a field of the dataclass.
            ConfigError, ParameterError: A value has the wrong type or is out of its domain.
        """
        source = f"node '{self._node.get_name()}' parameters"
        unknown = self._unknown_overrides()
        if unknown:
            raise UnknownKeyError(unknown[0], self.names, source)
        flat = {}
        for name in self.names:
            value = self._node.get_parameter(name).value
            if value is None and isinstance(self._defaults[name], list):
                value = []  # `[]` in a parameters file has no ROS type
            elif isinstance(value, (list, tuple)) or type(value).__name__ == "array":
                value = list(value)
            flat[name[len(self._prefix) + 1:] if self._prefix else name] = value
        return from_mapping(self._cls, unflatten(flat), source=source, prefix=self._prefix)


def node_options() -> dict[str, Any]:
    """Keyword arguments for ``Node.__init__`` used by every walk_mpc node (parameters declared by us)."""
    return {"automatically_declare_parameters_from_overrides": False}


def bringup_overrides(node_name: str, path: Optional[os.PathLike] = None) -> list[Parameter]:
    """Parameter overrides of ``node_name`` from the config file, for in-process bringup without the CLI."""
    return [Parameter(name, value=value) for name, value in flatten(config_defaults(node_name, path)).items()]


def is_shutdown(exc: BaseException, context=None, grace: float = 1.0) -> bool:
    """Whether ``exc`` is the shutdown of ``context`` (default: rclpy's) rather than an error.

    SIGINT (KeyboardInterrupt), an external shutdown, or a RuntimeError (RCLError, or pybind11's "Unable to
    convert call argument") raised by rclpy 9 from publish/take while a signal shuts the context down. The
    signal handler shuts the context down in another thread, so the error can come first: a RuntimeError
    is a shutdown if the context is down within ``grace`` [s] (checked every 10 ms). Use ``grace=0``
    inside a callback, where waiting would stall the node.
    """
    if isinstance(exc, (KeyboardInterrupt, ExternalShutdownException)):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    deadline = time.monotonic() + grace
    while rclpy.ok(context=context):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)  # the signal handler's thread is shutting the context down
    return True


def freeze_startup_objects() -> None:
    """Move every object alive (modules, robot model, solvers) out of the garbage collector's generations
    (``gc.freeze``), so later collections scan only what the control loop allocates. Measured in the graph:
    full collections of 25-150 ms during a walk without it.

    Only the young generations are collected first: a full collection of a node's 140 000 start-up objects
    took 60-90 ms of its start (issue 17) and found 7 unreachable ones in the ik (the collections during the
    imports had taken the rest); those few stay frozen.

    A process started by :mod:`walk_mpc.nodes.start` runs its imports and construction with the collector
    disabled (0.06-0.08 s less CPU in the ik); nothing is collected then (every object is young: a
    collection of the young generations would scan all 220 000 objects, 0.05 s, for about 1100 unreachable
    ones in the ik, left frozen), and the collector is enabled again."""
    if gc.isenabled():
        gc.collect(1)
    gc.freeze()
    gc.enable()


def realtime_priority(node: Node) -> int:
    """The node's ``realtime_priority`` parameter, validated (0-99).

    Raises:
        ParameterError: Not an integer in 0..99.
    """
    value = node.get_parameter(REALTIME_PRIORITY).value if node.has_parameter(REALTIME_PRIORITY) else 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 99:
        raise ParameterError(REALTIME_PRIORITY, value, "an integer in 0..99 (0 = normal scheduling, "
                             "1-99 = SCHED_FIFO priority)")
    return value


def fast_dispatch(node: Node) -> bool:
    """The node's ``fast_dispatch`` parameter, validated.

    Raises:
        ParameterError: Not a boolean.
    """
    value = node.get_parameter(FAST_DISPATCH).value if node.has_parameter(FAST_DISPATCH) else True
    if not isinstance(value, bool):
        raise ParameterError(FAST_DISPATCH, value, "true (FastDispatchExecutor) or false (rclpy's "
                             "SingleThreadedExecutor)")
    return value


def make_executor(node: Node, multithreaded: bool = False) -> Executor:
    """The executor :func:`run` spins ``node`` on: MultiThreadedExecutor if ``multithreaded``, else
    :class:`~walk_mpc.nodes._executor.FastDispatchExecutor` when the node's ``fast_dispatch`` is true and
    this rclpy supports it (a warning otherwise), else SingleThreadedExecutor.

    Raises:
        ParameterError: ``fast_dispatch`` is not a boolean.
    """
    wanted = fast_dispatch(node)
    if multithreaded:
        return MultiThreadedExecutor(context=node.context)
    if wanted:
        if fast_dispatch_supported():
            return FastDispatchExecutor(context=node.context)
        node.get_logger().warning(f"{FAST_DISPATCH} not available with this rclpy (no wait-set binding): "
                                  "running on SingleThreadedExecutor")
    return SingleThreadedExecutor(context=node.context)


def apply_realtime_priority(node: Node, deferred: Optional[list] = None) -> Optional[int]:
    """Put every thread of this process (rclpy's and the middleware's) under SCHED_FIFO at the node's
    ``realtime_priority``; threads created later inherit it. Returns the priority applied, or None.

    A control loop shares the CPUs with everything else on the machine; under the normal scheduler a node
    woken by a message waits behind any busy process. With SCHED_FIFO it runs as soon as it is runnable
    (benchmarks/graph_latency.py, 2 cores, across runs: sensor -> command p99 6.2-7.3 ms -> 2.9-4.6 ms).
    Without permission (root, CAP_SYS_NICE or ``ulimit -r``), or off Linux, it logs a warning and the
    node runs with normal scheduling. With ``deferred``, the log messages are appended to it as
    ``(level, text)`` (level: a logger method's name) instead of being logged.

    Raises:
        ParameterError: ``realtime_priority`` is not an integer in 0..99.
    """
    priority = realtime_priority(node)
    if priority == 0:
        return None

    def log(level: str, text: str) -> None:
        if deferred is None:
            getattr(node.get_logger(), level)(text)
        else:
            deferred.append((level, text))

    if not hasattr(os, "sched_setscheduler") or not os.path.isdir("/proc/self/task"):
        log("warning", f"{REALTIME_PRIORITY} {priority} not applied: SCHED_FIFO is Linux only")
        return None
    threads = sorted(int(tid) for tid in os.listdir("/proc/self/task"))
    try:
        for tid in threads:
            try:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
            except ProcessLookupError:
                pass  # the thread ended since it was listed
    except OSError as exc:
        for tid in threads:  # all or nothing: no half-real-time process
            try:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
            except OSError:
                pass
        log("warning", f"{REALTIME_PRIORITY} {priority} not applied ({exc.strerror}): SCHED_FIFO needs "
            f"root, CAP_SYS_NICE or an rtprio limit >= {priority} (ulimit -r, /etc/security/limits.conf); "
            "running with normal scheduling")
        return None
    log("info", f"SCHED_FIFO priority {priority} on the process' {len(threads)} threads")
    return priority


#: Environment variable: a directory where each node process writes a cProfile of its spin,
#: ``<dir>/<name>-<pid>.prof`` (``python -m pstats``), e.g. ``WALK_MPC_PROFILE=/tmp/prof make demo``.
PROFILE_ENV = "WALK_MPC_PROFILE"


@contextlib.contextmanager
def profiled(name: str):
    """Profile the block with cProfile when ``$WALK_MPC_PROFILE`` names a directory (else nothing): the
    statistics (CPU time of the calling thread, so a blocking wait counts only what it computes) are written
    there as ``<name>-<pid>.prof`` when the block ends, normally or not."""
    directory = os.environ.get(PROFILE_ENV, "")
    if not directory:
        yield
        return
    import cProfile

    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        Path(directory).mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(Path(directory) / f"{name}-{os.getpid()}.prof"))


def clean_dead_participants_files() -> None:
    """Before this process' DDS participant exists: mark dead and remove the shared-memory ports and segments
    that killed Fast DDS participants left (:func:`walk_mpc.fastdds_shm.clean_zombies_reported`; nothing with
    another RMW), so that the writers of a port this process may take again reopen it (issue 17: a restarted
    node whose peers kept writing into its predecessor's port). Never raises: a node starts anyway."""
    clean_zombies_reported("[walk_mpc]")


def enable_fault_reports() -> None:
    """A fatal signal in native code (solver, DDS) prints the Python stacks to stderr, and so does
    :data:`STACKS_SIGNAL` (SIGUSR1), without stopping the process: ``launch_graph`` sends it to a node that
    ignored SIGINT and SIGTERM before it kills it, so that its log says where it hung."""
    faulthandler.enable()
    if STACKS_SIGNAL is not None:
        faulthandler.register(STACKS_SIGNAL, all_threads=True, chain=False)


#: Per context, the hidden node of :func:`start_participant` (:func:`run` removes it once the node exists).
_STARTUP: dict = {}


def start_participant(name: str, args: Optional[Sequence[str]] = None) -> None:
    """Init rclpy and create this process' DDS participant now, before the modules of node ``name`` are
    imported (:mod:`walk_mpc.nodes.start`): DDS discovers the new participant (0.3-0.9 s after a restart)
    while the robot model, scipy, pinocchio and numba load (issue 17). The participant is made by a hidden
    node, ``_<name>_startup`` (no remapping, no rosout, no parameter services); :func:`run` builds the node
    on it, in the same context, then destroys the hidden node (the participant stays: it is the context's).
    """
    enable_fault_reports()
    clean_dead_participants_files()  # before this process' participant exists
    rclpy.init(args=args)
    context = rclpy.get_default_context()
    _STARTUP[context] = rclpy.create_node(f"_{name}_startup", context=context, use_global_arguments=False,
                                          enable_rosout=False, start_parameter_services=False)


def run_guarded(body: Callable[[], None], args: Optional[Sequence[str]] = None) -> int:
    """Init rclpy, run ``body`` (which spins), and shut down; exit code 2 on a configuration error."""
    enable_fault_reports()
    clean_dead_participants_files()
    rclpy.init(args=args)
    code = 0
    try:
        with profiled("bringup"):
            body()
    except WalkMpcError as exc:
        print(f"[walk_mpc] configuration error: {exc}", file=sys.stderr, flush=True)
        code = 2
    except (KeyboardInterrupt, RuntimeError, ExternalShutdownException) as exc:
        if not is_shutdown(exc):
            raise
    finally:
        rclpy.try_shutdown()
    return code


def run(
    make_node: Callable[[], Node],
    args: Optional[Sequence[str]] = None,
    multithreaded: bool = False,
) -> int:
    """Standard main(): init, build the node, spin until shutdown; exit code 2 on a configuration error.

    A configuration error (bad parameter, unknown key, missing file) is logged with its message and the
    process exits with code 2 instead of a traceback. SIGINT and external shutdown end the process cleanly.
    After :func:`start_participant` (``args`` then unused), the node is built on its participant.
    """
    startup = _STARTUP.pop(rclpy.get_default_context(), None) if rclpy.ok() else None
    if startup is None:  # else start_participant() did this, and made the participant
        enable_fault_reports()
        clean_dead_participants_files()
        rclpy.init(args=args)
    context = rclpy.get_default_context()
    node = None
    code = 0
    try:
        _EARLY_PRIORITY[context] = True  # the GraphNode built now applies its realtime_priority at once
        try:
            node = make_node()
        finally:
            early = _EARLY_PRIORITY.pop(context, True)
            if startup is not None:  # the node's own (or none, on an error): the participant is its now
                startup.destroy_node()
        if early is True:  # not a GraphNode (or it did not take the default context): apply it now
            apply_realtime_priority(node)
        else:
            for level, text in early[1]:
                getattr(node.get_logger(), level)(text)
        freeze_startup_objects()
        executor = make_executor(node, multithreaded)
        executor.add_node(node)
        with profiled(node.get_name()):
            executor.spin()
    except WalkMpcError as exc:
        print(f"[walk_mpc] configuration error: {exc}", file=sys.stderr, flush=True)
        code = 2
    except (KeyboardInterrupt, RuntimeError, ExternalShutdownException) as exc:
        # rclpy 9 can raise from take_message when SIGINT invalidates the context mid-callback; that is a
        # shutdown, not an error. Anything else while the context is still valid is re-raised.
        if not is_shutdown(exc):
            raise
    finally:
        if node is not None:
            destroy = getattr(node, "destroy", None)
            (destroy or node.destroy_node)()
        rclpy.try_shutdown()
    return code
