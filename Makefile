# walk_mpc: the two commands of the README, and a few more.
#   make demo   build, then run the main job (a simulated robot walking, with feedback and a plot);
#               make demo ROBOT=g1 SIM=mujoco: another robot of config/graph.yaml, MuJoCo physics;
#               make demo SIM=mujoco BALANCE=1: with the robot's balance setting (config/balance_talos.yaml)
#   make test   build, then run the whole test suite and print the pytest summary
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
ENV := source tools/env.sh &&
ROS := $(ENV) source install/setup.bash &&
PYTEST_ARGS ?=
SIM ?= kinematic
ROBOT ?= talos
BALANCE ?=

.PHONY: all setup build test demo bench lint clean distclean
all: build

setup:
	@tools/setup_env.sh

build: setup
	@$(ENV) CMAKE_BUILD_PARALLEL_LEVEL=2 colcon build --symlink-install --event-handlers console_direct- \
	  --cmake-args -DBUILD_TESTING=OFF -Wno-dev || { echo "colcon build failed: see log/latest_build" >&2; exit 1; }
	@stamp="install/.numba-warm-$$(cat walk_mpc/core/*/*_kernel.py walk_mpc/core/mpc/preview.py walk_mpc/core/mpc/daqp_backend.py | sha256sum | cut -c1-12)"; \
	  if [ ! -f "$$stamp" ]; then $(ROS) python -P -m walk_mpc.core.warmup && touch "$$stamp"; fi

test: build
	@$(ROS) WALK_MPC_REQUIRE_ROS=1 python -P -m pytest test -q -p no:cacheprovider $(PYTEST_ARGS)

demo: build
	@$(ROS) python -P -m walk_mpc.demo --robot $(ROBOT) --sim $(SIM) $(if $(filter 1 true yes,$(BALANCE)),--balance)

bench: build
	@$(ROS) for b in benchmarks/*.py; do echo "== $$b"; python -P $$b; done

lint: setup
	@$(ENV) ruff check walk_mpc test benchmarks launch

clean:
	rm -rf build install log

distclean: clean
	rm -rf "$$(tools/setup_env.sh --print-venv)"
