"""The ROS interfaces exist with the contract's names, constants and defaults, and round-trip."""

import pytest

pytestmark = pytest.mark.ros


def test_step_data_fields_and_foot_constants():
    from walk_mpc.msg import StepData

    msg = StepData()
    assert (StepData.FOOT_LEFT, StepData.FOOT_RIGHT) == (0, 1)
    for field in ("step_index", "foot_index", "duration", "position", "yaw", "normal", "swing_height"):
        assert hasattr(msg, field)


def test_walk_feedback_flags_are_atlas_bits():
    from walk_mpc.msg import WalkFeedback

    assert WalkFeedback.WALK_SUBSTATE_SWAYING == 1
    assert WalkFeedback.WALK_SUBSTATE_STEPPING == 2
    assert WalkFeedback.WALK_SUBSTATE_CATCHING == 4
    assert WalkFeedback.WALK_WARNING_INSUFFICIENT_STEP_DATA == 8
    assert WalkFeedback.WALK_ERROR_INCONSISTENT_STEPS == 16
    assert WalkFeedback.NUM_REQUIRED_WALK_STEPS == 4
    msg = WalkFeedback()
    for field in ("t_step_rem", "current_step_index", "next_step_index_needed", "status_flags",
                  "step_queue_saturated"):
        assert hasattr(msg, field)


def test_walk_action_error_codes_start_with_none():
    from walk_mpc.action import Walk

    codes = [Walk.Result.NONE, Walk.Result.INCONSISTENT_STEPS, Walk.Result.INSUFFICIENT_STEP_DATA,
             Walk.Result.INVALID_STEP, Walk.Result.CANCELED, Walk.Result.PREEMPTED,
             Walk.Result.PLANNER_FAILURE, Walk.Result.IK_FAILURE, Walk.Result.SENSOR_TIMEOUT]
    assert codes == list(range(9))
    result = Walk.Result()
    assert result.error_code == Walk.Result.NONE and result.error_msg == ""
    assert hasattr(result, "last_completed_step_index")
    assert Walk.Goal().plan_complete is True
    feedback = Walk.Feedback()
    assert hasattr(feedback.walk, "status_flags")
    assert hasattr(feedback, "support_foot_desired") and hasattr(feedback, "support_foot_measured")


def test_services_have_request_and_response_fields():
    from walk_mpc.srv import ExecGesture, QueueSteps, ResetWheelContact, SetGestureEffect

    assert [ExecGesture.Request.TX, ExecGesture.Request.TY, ExecGesture.Request.TZ, ExecGesture.Request.RX,
            ExecGesture.Request.RY, ExecGesture.Request.RZ] == list(range(6))
    assert hasattr(ExecGesture.Request(), "value")
    request = SetGestureEffect.Request(leg=3, effect=True)
    assert (request.leg, request.effect) == (3, True)
    response = QueueSteps.Response()
    assert (response.accepted, response.message, response.next_step_index_needed) == (False, "", 0)
    assert ResetWheelContact.Request().wheel_names == []


def test_sensor_state_has_haptix_fields():
    from walk_mpc.msg import SensorState

    msg = SensorState()
    for field in ("header", "joint_names", "joint_pos", "joint_vel", "motor_names", "motor_pos", "motor_vel",
                  "motor_torque", "contact_names", "contact", "imu_names", "imu_linear_acc",
                  "imu_angular_vel", "imu_orientation"):
        assert hasattr(msg, field)


def test_wheel_contact_messages():
    from walk_mpc.msg import WheelContact, WheelContactArray

    wheel = WheelContact(wheel_name="left_wheel", contact=True, inertia=0.01, abs_torque=0.5,
                         abs_acceleration=3.0)
    array = WheelContactArray(wheels=[wheel])
    assert array.wheels[0].wheel_name == "left_wheel"


@pytest.mark.parametrize("type_name", ["StepData", "WalkFeedback", "SensorState", "WheelContactArray",
                                       "FootstepPlan", "ComReference", "TickTiming"])
def test_messages_round_trip_through_serialization(type_name):
    from rclpy.serialization import deserialize_message, serialize_message

    import walk_mpc.msg as msgs
    from walk_mpc.tools.msgdict import from_dict, to_dict

    cls = getattr(msgs, type_name)
    msg = cls()
    if type_name == "SensorState":
        msg = from_dict(cls, {"joint_names": ["a", "b"], "joint_pos": [0.5, -0.25],
                              "imu_orientation": [{"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}]})
    if type_name == "WalkFeedback":
        msg = from_dict(cls, {"status_flags": 18,
                              "step_queue_saturated": [{"step_index": 3, "foot_index": 1}]})
    back = deserialize_message(serialize_message(msg), cls)
    assert back == msg
    assert to_dict(back) == to_dict(msg)


def test_step_conversion_round_trip_and_zero_normal_means_up():
    from walk_mpc.core.walk.step import Foot, Step
    from walk_mpc.msg import StepData
    from walk_mpc.nodes.conversions import step_from_msg, step_to_msg

    step = Step(4, Foot.RIGHT, 0.9, (0.3, -0.1, 0.02), yaw=0.2, swing_height=0.07)
    assert step_from_msg(step_to_msg(step)) == step
    assert step_from_msg(StepData(step_index=1, duration=1.0)).normal == (0.0, 0.0, 1.0)


def test_invalid_step_message_raises_named_error():
    from walk_mpc.core.errors import InvalidStepError
    from walk_mpc.msg import StepData
    from walk_mpc.nodes.conversions import step_from_msg

    with pytest.raises(InvalidStepError, match="foot_index 7"):
        step_from_msg(StepData(step_index=2, foot_index=7, duration=1.0))
    with pytest.raises(InvalidStepError, match="duration nan"):
        step_from_msg(StepData(step_index=2, duration=float("nan")))
