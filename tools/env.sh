# Source this file (bash) to get the walk_mpc toolchain: the venv made by tools/setup_env.sh, and, in wheels
# mode, the venv as the ROS prefix. Then `colcon build` and `source install/setup.bash` work as usual.
_walk_mpc_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_walk_mpc_venv="$(bash "$_walk_mpc_root/tools/setup_env.sh" --print-venv)"
if [ ! -x "$_walk_mpc_venv/bin/python" ]; then
  echo "tools/env.sh: $_walk_mpc_venv missing: run tools/setup_env.sh (or make build) first" >&2
  return 1 2>/dev/null || exit 1
fi
# shellcheck disable=SC1091
source "$_walk_mpc_venv/bin/activate"
if [ -z "${ROS_DISTRO:-}" ]; then
  # ROS 2 from PyPI wheels: the venv is laid out like a ROS prefix.
  export AMENT_PREFIX_PATH="$_walk_mpc_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$_walk_mpc_venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi
# DDS traffic stays on this machine unless the user says otherwise.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
unset _walk_mpc_root _walk_mpc_venv
