"""ROS 2 node ``wheel_contact``: upkie's wheel contact observer on each wheel of a SensorState stream.

Topics and services (names relative to the node's namespace):

* subscribes ``sensor_topic`` (``walk_mpc/msg/SensorState``);
* publishes ``output_topic`` (``walk_mpc/msg/WheelContactArray``): one message per SensorState sample,
  ``header`` copied from the sample (so ``header.stamp`` is the sample's stamp), one entry per wheel in
  the order of ``wheels``;
* serves ``~/reset_contact`` (``walk_mpc/srv/ResetWheelContact``, ``/wheel_contact/reset_contact`` under
  the default name): sets the contact of the listed wheels (all of them for an empty list) to false
  and keeps their filters, as upkie's ``reset_contact`` does. A request naming an unknown wheel resets
  nothing and answers ``success = false`` with the valid wheel names.

Inputs of one wheel in a sample:

* torque [N m]: ``motor_torque`` of the motor named like the wheel. SensorState carries no joint
  torque, so a wheel must be among ``motor_names``;
* velocity [rad/s]: ``motor_vel`` of that motor; when ``motor_vel`` is empty (publishers that report
  velocities per joint only), ``joint_vel`` of the joint named like the wheel.

Time: ``dt`` is the difference between the sample's ``header.stamp`` and the stamp of the previous
sample that carried this wheel (message time, never the wall clock), computed from integer
nanoseconds. The first sample of a wheel is observed with ``dt = expected_period`` rather than only
priming the stamp, so no sample is dropped and every published entry reflects every sample. The stamp
of a sample carrying the wheel becomes the wheel's reference even when the observer rejects the
sample, so a stamp going backwards, a repeated stamp or a gap longer than ``cutoff_period / 2`` costs
one rejected sample instead of stalling the wheel until the clock catches up.

Bad input never stops the node. A wheel missing from the sample, or motor/joint arrays whose lengths
differ from their names, are rejected by the node; non-finite values and ``dt <= 0`` (stamps going
backwards or repeated) or too long are rejected by the observer. Either way the wheel's entry keeps its
previous state, its ``rejected_samples`` (node and observer rejections together) increases, and a
warning naming the wheel and the reason is logged at most once per second, with the number of
rejections left unlogged since the previous warning.

QoS: ``sensor_qos = "reliable"`` (default) subscribes reliably with ``queue_depth`` samples of history
(1000 = 1 s at upkie's 1 kHz): the observer's filters are meant to see every sample, and a replay
bursting faster than real time must not drop any. A reliable subscription does not match a
best-effort publisher, so for a driver publishing with sensor-data QoS choose ``"sensor_data"``
(best effort, matches every publisher): a lost sample then only makes the next ``dt`` longer, which
the observer handles since ``dt`` comes from the stamps. The output is published reliably with
``queue_depth`` of history.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Optional, Sequence

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from walk_mpc.core.errors import ParameterError
from walk_mpc.core.params import check_choice, check_int_range, check_positive
from walk_mpc.core.wheel.contact import WheelContact
from walk_mpc.msg import SensorState, WheelContactArray
from walk_mpc.msg import WheelContact as WheelContactMsg
from walk_mpc.nodes._common import DataclassParameters, GraphNode, node_options, run
from walk_mpc.srv import ResetWheelContact

#: Values of ``WheelContactNodeParameters.sensor_qos``.
SENSOR_QOS = ("reliable", "sensor_data")

#: Minimum interval between two warnings about rejected samples [s].
WARNING_PERIOD = 1.0

_UINT32_MAX = 2**32 - 1


@dataclasses.dataclass(frozen=True)
class WheelContactNodeParameters:
    """Parameters of the wheel_contact node.

    Attributes:
        wheels: Names of the wheels, as in the SensorState's ``motor_names`` (and ``joint_names``).
        sensor_topic: Topic of the SensorState input.
        output_topic: Topic of the WheelContactArray output.
        sensor_qos: ``"reliable"`` or ``"sensor_data"`` (best effort) subscription to the input.
        queue_depth: History depth of the input subscription and of the output publisher [samples].
        expected_period: Period of the sensor stream [s], the ``dt`` of each wheel's first sample;
            the observer's filter periods must exceed twice this (checked at start).
        observer: Parameters of each wheel's observer.
    """

    wheels: tuple[str, ...] = ("left_wheel", "right_wheel")
    sensor_topic: str = "sensor_state"
    output_topic: str = "wheel_contact"
    sensor_qos: str = "reliable"
    queue_depth: int = 1000
    expected_period: float = 0.001
    observer: WheelContact.Parameters = dataclasses.field(default_factory=WheelContact.Parameters)

    def __post_init__(self) -> None:
        if not self.wheels:
            raise ParameterError("wheels", self.wheels, "at least one wheel name")
        for name in self.wheels:
            if not isinstance(name, str) or not name:
                raise ParameterError("wheels", self.wheels, "non-empty joint names")
        if len(set(self.wheels)) != len(self.wheels):
            raise ParameterError("wheels", self.wheels, "distinct wheel names")
        for field in ("sensor_topic", "output_topic"):
            if not getattr(self, field):
                raise ParameterError(field, getattr(self, field), "a topic name")
        check_choice("sensor_qos", self.sensor_qos, SENSOR_QOS)
        check_int_range("queue_depth", self.queue_depth, 1)
        check_positive("expected_period", self.expected_period)
        if not isinstance(self.observer, WheelContact.Parameters):
            raise ParameterError("observer", self.observer, "a WheelContact.Parameters")
        try:
            self.observer.check_dt(self.expected_period)
        except ParameterError as exc:
            expected = f"> 2 * expected_period = {2.0 * self.expected_period!r} s"
            raise ParameterError(f"observer.{exc.name}", exc.value, expected) from None


class _RejectedSample(Exception):
    """A wheel's torque or velocity cannot be read from a sample (internal, never escapes the node)."""


@dataclasses.dataclass
class _Wheel:
    """Observer of one wheel and the node's bookkeeping around it."""

    observer: WheelContact
    last_stamp_ns: Optional[int] = None
    input_rejections: int = 0  # samples the node could not read for this wheel


def _index(msg: SensorState, names_field: str, values_field: str, name: str) -> int:
    """Index of ``name`` in ``msg.<names_field>``, after checking one value per name in ``values_field``."""
    names, values = getattr(msg, names_field), getattr(msg, values_field)
    if len(values) != len(names):
        raise _RejectedSample(f"{values_field} has {len(values)} values for {len(names)} {names_field}")
    try:
        return list(names).index(name)
    except ValueError:
        raise _RejectedSample(f"not in {names_field} {list(names)}") from None


def wheel_inputs(msg: SensorState, name: str) -> tuple[float, float]:
    """Torque [N m] and velocity [rad/s] of wheel ``name`` in a SensorState (see the module docstring).

    Raises:
        _RejectedSample: The wheel is missing or the arrays are inconsistent.
    """
    i = _index(msg, "motor_names", "motor_torque", name)
    torque = msg.motor_torque[i]
    if len(msg.motor_vel) == len(msg.motor_names):
        return torque, msg.motor_vel[i]
    if len(msg.motor_vel) > 0:
        count = len(msg.motor_vel)
        raise _RejectedSample(f"motor_vel has {count} values for {len(msg.motor_names)} motor_names")
    j = _index(msg, "joint_names", "joint_vel", name)
    return torque, msg.joint_vel[j]


class WheelContactNode(GraphNode):
    """Observe the floor contact of each wheel from the SensorState stream."""

    def __init__(self, params: Optional[WheelContactNodeParameters] = None, **kwargs) -> None:
        """Create the node.

        Args:
            params: Parameters; None reads them from the node's ROS parameters.
            **kwargs: Passed to ``Node.__init__`` (``parameter_overrides``, ``context``).

        Raises:
            ConfigError, ParameterError: A parameter is unknown or invalid.
        """
        super().__init__("wheel_contact", **node_options(), **kwargs)
        if params is None:
            params = DataclassParameters(self, WheelContactNodeParameters).read()
        self.params = params
        self._wheels = {name: _Wheel(WheelContact(params.observer)) for name in params.wheels}
        self._unlogged_rejections = 0
        reliability = (
            ReliabilityPolicy.RELIABLE if params.sensor_qos == "reliable" else ReliabilityPolicy.BEST_EFFORT
        )
        sensor_qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=params.queue_depth, reliability=reliability,
            durability=DurabilityPolicy.VOLATILE,
        )
        output_qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=params.queue_depth, reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.VOLATILE,
        )
        self._publisher = self.create_publisher(WheelContactArray, params.output_topic, output_qos)
        self._subscription = self.create_subscription(
            SensorState, params.sensor_topic, self._on_sensor_state, sensor_qos
        )
        self._service = self.create_service(ResetWheelContact, "~/reset_contact", self._on_reset_contact)
        self.get_logger().info(
            f"observing {list(params.wheels)} on '{self._subscription.topic_name}' "
            f"({params.sensor_qos} QoS), publishing '{self._publisher.topic_name}', "
            f"service '{self.resolve_service_name(self._service.srv_name)}'"
        )

    @property
    def wheels(self) -> tuple[str, ...]:
        """Names of the observed wheels."""
        return tuple(self._wheels)

    def observer(self, name: str) -> WheelContact:
        """Observer of wheel ``name`` (read-only use)."""
        return self._wheels[name].observer

    def _on_sensor_state(self, msg: SensorState) -> None:
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        problems = []
        for name, wheel in self._wheels.items():
            try:
                torque, velocity = wheel_inputs(msg, name)
            except _RejectedSample as exc:
                wheel.input_rejections += 1
                problems.append(f"{name}: {exc}")
                continue
            if wheel.last_stamp_ns is None:
                dt = self.params.expected_period
            else:
                dt = (stamp_ns - wheel.last_stamp_ns) / 1e9
            wheel.last_stamp_ns = stamp_ns
            if not wheel.observer.observe(torque, velocity, dt):
                problems.append(f"{name}: {wheel.observer.last_rejection}")
        if problems:
            self._report(stamp_ns, problems)
        self._publisher.publish(self._output(msg))

    def _report(self, stamp_ns: int, problems: list[str]) -> None:
        """Log rejected samples, at most once per WARNING_PERIOD, counting the ones left unlogged."""
        unlogged = self._unlogged_rejections
        more = f" ({unlogged} more rejected samples since the previous warning)" if unlogged else ""
        stamp = f"{stamp_ns // 1_000_000_000}.{stamp_ns % 1_000_000_000:09d}"
        message = f"sample at stamp {stamp} s rejected for {'; '.join(problems)}{more}"
        if self.get_logger().warning(message, throttle_duration_sec=WARNING_PERIOD):
            self._unlogged_rejections = 0
        else:
            self._unlogged_rejections += 1

    def _output(self, msg: SensorState) -> WheelContactArray:
        out = WheelContactArray()
        out.header = msg.header
        out.wheels = [
            WheelContactMsg(
                wheel_name=name,
                contact=wheel.observer.contact,
                inertia=wheel.observer.inertia,
                abs_torque=wheel.observer.abs_torque,
                abs_acceleration=wheel.observer.abs_acceleration,
                rejected_samples=min(wheel.observer.rejected_samples + wheel.input_rejections, _UINT32_MAX),
            )
            for name, wheel in self._wheels.items()
        ]
        return out

    def _on_reset_contact(self, request, response):
        names = list(request.wheel_names) or list(self._wheels)
        unknown = [name for name in names if name not in self._wheels]
        if unknown:
            response.success = False
            response.message = (
                f"unknown wheel(s) {unknown}: nothing reset; valid wheels are {list(self._wheels)}"
            )
            self.get_logger().warning(response.message)
            return response
        for name in names:
            self._wheels[name].observer.reset_contact()
        response.success = True
        response.message = f"contact reset to false on {names}"
        self.get_logger().info(response.message)
        return response


NODE_CLASS = WheelContactNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the wheel_contact node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: WheelContactNode(), args)


if __name__ == "__main__":
    sys.exit(main())
