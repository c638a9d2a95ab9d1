"""A node's rclpy logger without rclpy's inspection of each caller (issue 17: a restarted node's start).

rclpy's ``RcutilsLogger`` finds each caller's file with ``inspect.getframeinfo``: the first call of a process
maps every loaded module to its file (70-95 ms measured in a node's construction, on the way of a restarted
node back into its loop), later ones 0.2-0.3 ms. :class:`NodeLogger` sends a call without a filter straight to
the rcutils function rclpy's logger calls (the same output and /rosout), with the caller's function, file and
line taken from its frame (0.01-0.13 ms). Calls with filters (``throttle_duration_sec``, ``once``,
``skip_first``) and every other attribute are the rclpy logger's; for those, this module's file is one of the
logging files rclpy skips to find the caller (``rcutils_logger._internal_callers``, the list rclpy keeps open
to third parties), so that each call site keeps its own filter.
"""

from __future__ import annotations

import os
import sys

from rclpy.logging import LoggingSeverity

try:  # the binding and the caller list of rclpy's own loggers
    from rclpy.impl import rcutils_logger as _rcutils_logger
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    _rcutils_log = _rclpy.rclpy_logging_rcutils_log
    _internal_callers = _rcutils_logger._internal_callers
except (ImportError, AttributeError):  # pragma: no cover - another rclpy: its own loggers are used
    _rcutils_log = _internal_callers = None

if _internal_callers is not None:
    _internal_callers.append(os.path.realpath(__file__))


class NodeLogger:
    """An rclpy node logger whose calls without filters skip rclpy's caller inspection (module docstring)."""

    def __init__(self, logger) -> None:
        self._logger = logger

    def __getattr__(self, name: str):
        return getattr(self._logger, name)

    def _log(self, severity: LoggingSeverity, message, kwargs: dict) -> bool:
        logger = self._logger
        if kwargs:
            return logger.log(message, severity, **kwargs)
        if not logger.is_enabled_for(severity):
            return False
        caller = sys._getframe(2)
        _rcutils_log(severity, logger.name, str(message), caller.f_code.co_name,
                     os.path.abspath(caller.f_code.co_filename), caller.f_lineno)
        return True

    def debug(self, message, **kwargs) -> bool:
        return self._log(LoggingSeverity.DEBUG, message, kwargs)

    def info(self, message, **kwargs) -> bool:
        return self._log(LoggingSeverity.INFO, message, kwargs)

    def warning(self, message, **kwargs) -> bool:
        return self._log(LoggingSeverity.WARN, message, kwargs)

    warn = warning

    def error(self, message, **kwargs) -> bool:
        return self._log(LoggingSeverity.ERROR, message, kwargs)

    def fatal(self, message, **kwargs) -> bool:
        return self._log(LoggingSeverity.FATAL, message, kwargs)


def node_logger(logger):
    """``logger`` (an rclpy node's) as a :class:`NodeLogger`; itself where this rclpy lacks the binding."""
    return logger if _rcutils_log is None else NodeLogger(logger)
