"""The node graph of config/graph.yaml, shared by launch/walk.launch.py and the in-process bringup."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from walk_mpc.core.errors import ConfigError
from walk_mpc.core.params import load_yaml
from walk_mpc.fastdds_shm import FASTDDS_RMWS

#: The signal on which a walk_mpc node process prints every thread's Python stack to stderr (its log) and goes
#: on (``walk_mpc.nodes._common.enable_fault_reports``); ``launch_graph`` sends it before killing a node that
#: ignored SIGINT and SIGTERM. None where the platform has no SIGUSR1.
STACKS_SIGNAL = getattr(signal, "SIGUSR1", None)

CONDITIONS = ("always", "sim", "wheels", "legs")
#: Name of the process running a robot's control nodes (every node but the sim) with ``control_process``.
CONTROL = "control"
SIM_BACKENDS = ("none", "kinematic", "mujoco")
#: The simulator backends a balance setting applies to: physics, or a real robot (none). On the kinematic
#: plant the sole forces' centre of pressure is the ZMP of its commanded motion, with no ankle compliance:
#: the stabilizer's ankle (CoP) admittance oscillates on it (joint velocities of 0.5-0.8 rad/s standing).
BALANCE_SIMS = ("mujoco", "none")


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """One node of the graph: its name (also its parameters section), executable and start condition."""

    name: str
    executable: str
    when: str = "always"


@dataclasses.dataclass(frozen=True)
class RobotSpec:
    """What a robot has, its default parameters file name, and its robot description.

    ``model`` names a robot description (config/robots/<model>.yaml) replacing the parameters file's robot:
    the nodes get :func:`robot_overrides` of it on top of the file ('' = the file's robot as it is).
    ``balance`` names the robot's balance setting (a parameters file in the config directory whose
    sections overlay the parameters file's, :func:`overlay_parameters_file`; '' = none): the setting its
    balance was measured with (README, Balance), turned on by ``balance:=true`` / ``--balance``.
    """

    name: str
    wheels: bool
    legs: bool
    config: str
    model: str = ""
    balance: str = ""


@dataclasses.dataclass(frozen=True)
class Graph:
    """The whole graph description."""

    nodes: Tuple[NodeSpec, ...]
    robots: Tuple[RobotSpec, ...]
    directory: Path

    def robot(self, name: str) -> RobotSpec:
        """The robot called ``name``.

        Raises:
            ConfigError: If no robot has this name (the message lists the known ones).
        """
        for robot in self.robots:
            if robot.name == name:
                return robot
        raise ConfigError(f"unknown robot '{name}'; known robots: {[r.name for r in self.robots]}", "robot")

    def config_path(self, robot: str, config: Optional[str] = None, balance: bool = False,
                    directory: Optional[Path] = None, sim: Optional[str] = None) -> Path:
        """The parameters file: ``config`` if given, else the robot's default in the config directory; with
        ``balance``, a copy of it with the robot's balance setting over it (:meth:`balance_path`,
        :func:`overlay_parameters_file`; in ``directory``, default a new temporary directory) for the
        simulator backend ``sim`` (one of :data:`BALANCE_SIMS`).

        Raises:
            ConfigError: On an unknown robot, a robot without a balance setting or a simulator backend it
                does not apply to (with ``balance``), or an unreadable or malformed file.
        """
        path = Path(config) if config else self.directory / self.robot(robot).config
        if not balance:
            return path
        if sim not in BALANCE_SIMS:
            raise ConfigError(f"the balance setting needs contact forces from physics: sim {sim!r} is not "
                              f"one of {list(BALANCE_SIMS)} (the kinematic plant's centre of pressure is the "
                              "ZMP of its own motion: the stabilizer's ankle admittance oscillates on it)",
                              "sim")
        return overlay_parameters_file(path, self.balance_path(robot), self, directory)

    def balance_path(self, robot: str) -> Path:
        """The balance setting of ``robot`` (its ``balance`` file in the config directory).

        Raises:
            ConfigError: On an unknown robot or one without a balance setting (the message lists those
                that have one).
        """
        spec = self.robot(robot)
        if not spec.balance:
            raise ConfigError(f"robot '{robot}' has no balance setting in graph.yaml; robots with one: "
                              f"{[r.name for r in self.robots if r.balance]}", "balance")
        return self.directory / spec.balance

    def overrides(self, robot: str) -> Dict[str, Dict[str, Any]]:
        """Per node name, the parameters that make the parameters file drive ``robot`` (see
        :func:`robot_overrides`; empty for a robot without ``model``).

        Raises:
            ConfigError: On an unknown robot or robot description.
        """
        spec = self.robot(robot)
        return robot_overrides(spec.model) if spec.model else {}

    def select(self, robot: str, sim: str) -> Tuple[NodeSpec, ...]:
        """The nodes to start for ``robot`` with the simulator backend ``sim`` ('none' for a real robot).

        Raises:
            ConfigError: On an unknown robot or simulator backend.
        """
        if sim not in SIM_BACKENDS:
            raise ConfigError(f"unknown simulator '{sim}'; expected one of {list(SIM_BACKENDS)}", "sim")
        spec = self.robot(robot)
        active = {"always": True, "sim": sim != "none", "wheels": spec.wheels, "legs": spec.legs}
        return tuple(node for node in self.nodes if active[node.when])

    def processes(self, robot: str, sim: str, control_process: bool = False) -> Dict[str, Tuple[str, ...]]:
        """The processes that run the nodes of :meth:`select`: process name -> the nodes it runs.

        One process per node (named after it), or with ``control_process`` every node but the sim in one
        process named :data:`CONTROL` (``walk_mpc.nodes.bringup --nodes ...``, see
        :func:`control_arguments`) beside the sim's own: one interpreter and one DDS participant for the
        control loop instead of one per node (benchmarks/multi_robot.py ``--mode control``).

        Raises:
            ConfigError: On an unknown robot or simulator backend.
        """
        names = tuple(spec.name for spec in self.select(robot, sim))
        if not control_process:
            return {name: (name,) for name in names}
        control = tuple(name for name in names if name != "sim")
        return {CONTROL: control, **({"sim": ("sim",)} if "sim" in names else {})}


def control_arguments(robot: str, sim: str, nodes: Sequence[str], config: Optional[str] = None,
                      namespace: str = "", balance: bool = False) -> List[str]:
    """Command-line arguments of ``walk_mpc.nodes.bringup`` running ``nodes`` of ``robot`` in one process (the
    :data:`CONTROL` process of :meth:`Graph.processes`); the same for launch/walk.launch.py and
    :class:`walk_mpc.tools.launch_graph.GraphProcesses`. The bringup applies the robot's overrides and the
    namespace (nodes, topics and frames) itself."""
    args = ["--robot", robot, "--sim", sim, "--nodes", *nodes]
    if config:
        args += ["--config", str(config)]
    if namespace:
        args += ["--namespace", namespace]
    if balance:
        args.append("--balance")
    return args


def overlay_parameters_file(path: Path, overlay: Path, graph: Optional[Graph] = None,
                            directory: Optional[Path] = None) -> Path:
    """A copy of parameters file ``path`` with the parameters of ``overlay`` (a parameters file of some of
    the graph's nodes, e.g. a robot's balance setting) over its own: sections merged key by key, the
    overlay's values replacing the file's. What the overlay sets must be settable: a node of the graph
    (``graph``, default :func:`load_graph`), in ROS's ``<node>: {ros__parameters: {...}}`` form, a value
    where the file has a value (not a whole group); the nodes refuse a name that is none of their
    parameters when they start.

    Args:
        path: Parameters file.
        overlay: Parameters file whose values win.
        graph: The graph whose nodes the overlay may set.
        directory: Where the copy goes (default: a new temporary directory).

    Raises:
        ConfigError: Unreadable files, or an overlay section or key that cannot apply (named).
    """
    import tempfile

    import yaml

    document = overlay_parameters(path, overlay, graph)
    directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="walk_mpc_params_"))
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{Path(path).stem}+{Path(overlay).name}"
    out.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return out


def overlay_parameters(path: Path, overlay: Path, graph: Optional[Graph] = None) -> Dict[str, Any]:
    """The document of :func:`overlay_parameters_file` (parameters file ``path`` with ``overlay``'s values
    over its own), without writing it.

    Raises:
        ConfigError: Unreadable files, or an overlay section or key that cannot apply (named).
    """
    import copy

    graph = graph if graph is not None else load_graph()
    names = {node.name for node in graph.nodes}
    document = copy.deepcopy(load_yaml(path))
    source = str(overlay)
    for node, section in load_yaml(overlay).items():
        if node not in names:
            raise ConfigError(f"'{node}' is not a node of the graph; expected one of {sorted(names)}",
                              str(node), source)
        if not isinstance(section, dict) or set(section) != {"ros__parameters"} \
                or not isinstance(section["ros__parameters"], dict):
            raise ConfigError("expected a 'ros__parameters' mapping (ROS 2 parameters file)", str(node),
                              source)
        target = document.setdefault(node, {}).setdefault("ros__parameters", {})
        _merge(target, section["ros__parameters"], f"{node}.ros__parameters", source)
    return document


def _merge(target: Dict[str, Any], values: Dict[str, Any], where: str, source: str) -> None:
    """``values`` into ``target`` key by key (groups merged, values replaced)."""
    for key, value in values.items():
        name = f"{where}.{key}"
        current = target.get(key)
        if isinstance(value, dict):
            if current is None:
                target[key] = current = {}
            if not isinstance(current, dict):
                raise ConfigError(f"a group where the parameters file has the value {current!r}", name,
                                  source)
            _merge(current, value, name, source)
        elif isinstance(current, dict):
            raise ConfigError(f"the value {value!r} where the parameters file has a group "
                              f"{sorted(current)}", name, source)
        else:
            target[key] = value


def default_config_directory() -> Path:
    """The installed share/walk_mpc/config, or the source tree's config/ when not installed."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            return Path(get_package_share_directory("walk_mpc")) / "config"
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    return Path(__file__).resolve().parents[1] / "config"


#: walk_mpc's Fast DDS participant profile (config/fastdds_localhost.xml): discovery of a restarted node in
#: milliseconds instead of up to 3 s (the file says why).
FASTDDS_PROFILE = "fastdds_localhost.xml"

#: Environment variable: "0" (or "false", "off") keeps Fast DDS's own discovery settings.
FASTDDS_PROFILE_ENV = "WALK_MPC_FASTDDS_PROFILE"


def dds_environment(environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Environment variables to add for the graph's node processes: ``FASTDDS_DEFAULT_PROFILES_FILE`` =
    :data:`FASTDDS_PROFILE` when the middleware is rmw_fastrtps (the default), no Fast DDS profile file is
    set already, and :data:`FASTDDS_PROFILE_ENV` is not "0"; else nothing (another RMW, the user's profile).

    Args:
        environ: The environment to check (default: ``os.environ``).
    """
    env = os.environ if environ is None else environ
    if (env.get(FASTDDS_PROFILE_ENV, "").lower() in ("0", "false", "off")
            or env.get("RMW_IMPLEMENTATION", "") not in FASTDDS_RMWS
            or env.get("FASTDDS_DEFAULT_PROFILES_FILE") or env.get("FASTRTPS_DEFAULT_PROFILES_FILE")):
        return {}
    path = default_config_directory() / FASTDDS_PROFILE
    return {"FASTDDS_DEFAULT_PROFILES_FILE": str(path)} if path.is_file() else {}


def load_graph(path: Optional[Path] = None) -> Graph:
    """Read and validate config/graph.yaml.

    Raises:
        ConfigError: On a malformed file (unknown keys, unknown conditions, duplicate names).
    """
    path = Path(path) if path else default_config_directory() / "graph.yaml"
    data = load_yaml(path)
    source = str(path)
    unknown = set(data) - {"nodes", "robots"}
    if unknown:
        raise ConfigError(f"unknown keys {sorted(unknown)}; expected nodes, robots", source=source)
    nodes = []
    for i, entry in enumerate(data.get("nodes") or []):
        if not isinstance(entry, dict) or "name" not in entry:
            raise ConfigError("each node needs a name", f"nodes[{i}]", source)
        extra = set(entry) - {"name", "executable", "when"}
        if extra:
            raise ConfigError(f"unknown keys {sorted(extra)}; expected name, executable, when",
                              f"nodes[{i}]", source)
        when = entry.get("when", "always")
        if when not in CONDITIONS:
            raise ConfigError(f"unknown condition '{when}'; expected one of {list(CONDITIONS)}",
                              f"nodes[{i}].when", source)
        nodes.append(NodeSpec(entry["name"], entry.get("executable", entry["name"]), when))
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ConfigError(f"duplicate node names in {names}", "nodes", source)
    robots = []
    for name, entry in (data.get("robots") or {}).items():
        extra = set(entry) - {"wheels", "legs", "config", "model", "balance"}
        if extra:
            raise ConfigError(f"unknown keys {sorted(extra)}; expected wheels, legs, config, model, balance",
                              f"robots.{name}", source)
        robots.append(RobotSpec(name, bool(entry.get("wheels", False)), bool(entry.get("legs", True)),
                                str(entry.get("config", "walk_mpc.yaml")), str(entry.get("model", "")),
                                str(entry.get("balance", ""))))
    return Graph(tuple(nodes), tuple(robots), path.parent)


def robot_overrides(model: str) -> Dict[str, Dict[str, Any]]:
    """Per node name, the flat (dotted) parameters of the legged graph that come from robot description
    ``model`` (config/robots/<model>.yaml, or a robot YAML path): the robot of every node, the planner's
    sole region and LIPM height, the walk behavior's step limits, double support and initial feet, the
    sole size of the ik's stabilizer and of the simulator (which takes the robot's IMU frame when the file's
    ``imu_frame`` is '').

    Raises:
        ConfigError, ParameterError, ModelError: The description cannot be loaded.
    """
    from walk_mpc.core.body.robot import RobotModel  # pinocchio: loaded only for robots with a model

    robot = RobotModel(RobotModel.Parameters(robot=model))
    limits = robot.step_limits()
    sole = robot.planner_sole()
    q = robot.reference_configuration()
    feet = robot.foot_poses(q) if robot.is_biped else {}

    def position(frame: str) -> list:
        return [round(float(v), 6) for v in feet[frame][0]]

    walk_behavior: Dict[str, Any] = {"robot.robot": model}
    if robot.is_biped:
        walk_behavior.update({
            "behavior.limits.max_forward": limits.max_forward,
            "behavior.limits.max_backward": limits.max_backward,
            "behavior.limits.min_width": limits.min_width,
            "behavior.limits.max_width": limits.max_width,
            "behavior.limits.max_yaw_change": limits.max_yaw_change,
            "behavior.timing.double_support_duration": limits.double_support,
            "initial_left_position": position(robot.left_foot_frame),
            "initial_right_position": position(robot.right_foot_frame),
        })
    planner: Dict[str, Any] = {"robot.robot": model}
    if robot.is_biped:
        planner.update({"planner.sole.front": sole.front, "planner.sole.back": sole.back,
                        "planner.sole.left": sole.left, "planner.sole.right": sole.right,
                        "planner.mpc.com_height": round(robot.standing_com_height(), 4)})
    sim: Dict[str, Any] = {"kinematic.robot.robot": model}
    ik: Dict[str, Any] = {"robot.robot": model}
    if robot.is_biped:
        size = robot.sole_size
        sim.update({"kinematic.sole_front": size.front, "kinematic.sole_back": size.back,
                    "kinematic.sole_left": size.left, "kinematic.sole_right": size.right})
        ik.update({"stabilizer.sole_front": size.front, "stabilizer.sole_back": size.back,
                   "stabilizer.sole_left": size.left, "stabilizer.sole_right": size.right})
    return {"walk_behavior": walk_behavior, "mpc_planner": planner, "ik": ik, "sim": sim,
            "robot_state": {"frames.robot.robot": model}}


#: Nodes publishing frame ids, and their parameter naming the fixed frame.
FRAME_PARAMETERS = {"mpc_planner": "frame_id", "sim": "frame_id", "robot_state": "frames.world_frame"}

#: Nodes publishing the robot's links, and their parameter prefixing the link names.
FRAME_PREFIX_PARAMETERS = {"robot_state": "frames.frame_prefix"}


def check_namespace(namespace: str) -> str:
    """``namespace`` without leading / trailing slashes ('' for none).

    Raises:
        ConfigError: Not a ROS name (letters, digits, underscores and '/', not starting with a digit).
    """
    if not isinstance(namespace, str):
        raise ConfigError(f"namespace must be a string, got {namespace!r}", "namespace")
    stripped = namespace.strip("/")
    for part in stripped.split("/") if stripped else []:
        if not part or not (part[0].isalpha() or part[0] == "_") or not all(
                c.isalnum() or c == "_" for c in part):
            raise ConfigError(f"invalid namespace '{namespace}': ROS names are letters, digits and '_' "
                              "separated by '/', not starting with a digit", "namespace")
    return stripped


def namespace_frames(namespace: str) -> Dict[str, Dict[str, Any]]:
    """Per node name, the frame parameters of a graph in ``namespace``: the fixed frame ``<namespace>/world``
    and the links ``<namespace>/<link>`` (empty without a namespace: the parameters file's)."""
    stripped = check_namespace(namespace)
    if not stripped:
        return {}
    frames: Dict[str, Dict[str, Any]] = {node: {parameter: f"{stripped}/world"}
                                         for node, parameter in FRAME_PARAMETERS.items()}
    for node, parameter in FRAME_PREFIX_PARAMETERS.items():
        frames.setdefault(node, {})[parameter] = f"{stripped}/"
    return frames


def namespaced_parameters_file(path: Path, namespace: str, directory: Optional[Path] = None) -> Path:
    """A copy of parameters file ``path`` whose node sections apply to the nodes in ``namespace``.

    ROS matches a section ``ik:`` only to the node ``/ik``: in a namespace the nodes would silently run
    on their defaults. The copy keys each section by the node's full name (``/robot1/ik:``). Returns
    ``path`` itself without a namespace.

    Args:
        path: Parameters file.
        namespace: Namespace of the nodes ('' = none).
        directory: Where the copy goes (default: a new temporary directory).

    Raises:
        ConfigError: Unreadable file or invalid namespace.
    """
    import tempfile

    import yaml

    stripped = check_namespace(namespace)
    if not stripped:
        return Path(path)
    document = load_yaml(path)
    rewritten = {key if str(key).startswith("/") else f"/{stripped}/{key}": value
                 for key, value in document.items()}
    directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="walk_mpc_params_"))
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{stripped.replace('/', '_')}_{Path(path).name}"
    out.write_text(yaml.safe_dump(rewritten, sort_keys=False), encoding="utf-8")
    return out
